"""Value types of the commands' own flags (`recommend --target-rps`, `testbed up --envoy-cpu`, ...).

A command reads each flag's text once through one of these, before it loads anything; a bad value is a UsageError
naming the flag and an example, which `runner.cli.main` prints as one line. The sweep options are not here: they
are scenario fields (`runner.scenario.options`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.errors import UsageError
from runner.quantities import format_cpu, parse_cpu, short_repr


@dataclass(frozen=True)
class Number:
    """A finite number at most `high` (and at least `low` when set). The command checks what is domain knowledge
    (a positive target, a whole count)."""

    flag: str
    example: str
    high: float
    low: float | None = None
    low_text: str = ""  # how `low` is read out, when not as a plain number: "0.01 (10m)"

    def optional(self, text: str | None) -> float | None:
        """The number, or None for a flag not given or given empty."""
        return None if text is None or text == "" else self(text)

    def __call__(self, text: str) -> float:
        hint = f"e.g. {self.flag} {self.example}"
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{self.flag} must be a number, got {short_repr(text)}", hint) from None
        if not math.isfinite(value):
            raise UsageError(f"{self.flag} must be a finite number, got {short_repr(text)}", hint)
        if value > self.high:
            raise UsageError(f"{self.flag} must be at most {self.high:g}, got {short_repr(text)}", hint)
        if self.low is not None and value < self.low:
            raise UsageError(f"{self.flag} must be at least {self.low_text or f'{self.low:g}'}, got {value:g}", hint)
        return value


@dataclass(frozen=True)
class Cpu:
    """A CPU quantity (cores or millicores) from `low` to `high` cores, in whole millicores."""

    flag: str
    low: float
    high: float

    def __call__(self, text: str) -> float:
        hint = f"e.g. {self.flag} 0.25 or {self.flag} 250m"
        try:
            cpu = parse_cpu(text)
        except ValueError:
            raise UsageError(f"{self.flag} must be a CPU quantity, got {short_repr(text)}", hint) from None
        if not self.low <= cpu <= self.high:
            raise UsageError(
                f"{self.flag} must be from {format_cpu(self.low)} to {self.high:g} cores, got {short_repr(text)}", hint
            )
        if abs(cpu * 1000 - round(cpu * 1000)) > 1e-6:
            raise UsageError(f"{self.flag} {short_repr(text)} is finer than 1m", f"use whole millicores, {hint}")
        return cpu

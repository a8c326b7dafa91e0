"""What a check of the cluster as the run finds it says before any change: a refusal (one line naming the problem
and the fix) or a warning, as values. The checks (listeners.py, gateway_class.py, autoscalers.py) return them;
`settle` prints the warnings and raises the first refusal, and a preflight can list them all. A check made again
during the run raises its refusal as the error that stops the run (class_gateways.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runner.errors import UsageError


@dataclass(frozen=True)
class Finding:
    """One thing a check found: `problem` and its `fix`; `refuse`: the run must not start (else a warning)."""

    problem: str
    fix: str
    refuse: bool = True

    def error(self) -> UsageError:
        return UsageError(self.problem, self.fix)

    def warning(self) -> str:
        return f"warning: {self.problem}: {self.fix}"


def warn_on_stderr(line: str) -> None:
    print(f"gateway-sizer: {line}", file=sys.stderr)


def settle(findings: Iterable[Finding], warn: Callable[[str], None] = warn_on_stderr) -> None:
    """Say every warning (`warn`), then raise the first refusal as a UsageError."""
    found = list(findings)
    for finding in found:
        if not finding.refuse:
            warn(finding.warning())
    refused = next((finding for finding in found if finding.refuse), None)
    if refused is not None:
        raise refused.error()

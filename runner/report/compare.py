"""Two runs side by side, pure: the knee of each matching configuration and its change in percent.

A regression is a knee that fell by more than the threshold, or a configuration that had a valid knee in
the first run and has none in the second (failed, invalid or not saturated): a CI gate must not pass that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.errors import UsageError
from runner.model import ConfigResult, RunSummary
from runner.report import formatting as fmt
from runner.report.sizing import valid_knee

__all__ = ["DEFAULT_THRESHOLD_PCT", "Comparison", "ComparisonRow", "compare_runs", "format_comparison"]

DEFAULT_THRESHOLD_PCT = 5.0


def _valid_knee(config: ConfigResult | None) -> float | None:
    knee = valid_knee(config) if config is not None else None
    return knee.rps if knee is not None else None


@dataclass(frozen=True)
class ComparisonRow:
    """One configuration key in either run."""

    label: str
    knee_a: float | None
    knee_b: float | None
    status_a: str | None
    status_b: str | None
    regression: bool

    @property
    def change_pct(self) -> float | None:
        if self.knee_a is None or self.knee_b is None:
            return None
        return (self.knee_b - self.knee_a) / self.knee_a * 100

    @property
    def note(self) -> str:
        if self.status_a is None:
            return "only in B"
        if self.status_b is None:
            return "only in A"
        if self.knee_a is not None and self.knee_b is None:
            return f"no valid knee in B ({self.status_b})"
        if self.knee_a is None:
            return f"no valid knee in A ({self.status_a})"
        return "regression" if self.regression else ""


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    threshold_pct: float
    rows: tuple[ComparisonRow, ...]

    @property
    def regressions(self) -> list[ComparisonRow]:
        return [r for r in self.rows if r.regression]


def compare_runs(a: RunSummary, b: RunSummary, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Comparison:
    """Match configurations by key; UsageError when the runs cannot be compared at all."""
    if not math.isfinite(threshold_pct) or threshold_pct < 0:
        raise UsageError(f"--threshold-pct must be 0 or more, got {threshold_pct:g}", "e.g. --threshold-pct 5")
    for name, run in (("A", a), ("B", b)):
        if not any(_valid_knee(c) is not None for c in run.configs):
            raise UsageError(
                f"run {name} ({run.run_id}) has no valid knee to compare",
                "compare runs whose sweeps reached the threshold (see their reports)",
            )
    keys_a, keys_b = [c.key for c in a.configs], [c.key for c in b.configs]
    if not set(keys_a) & set(keys_b):
        raise UsageError(
            f"runs {a.run_id} and {b.run_id} share no configuration",
            "compare two sweeps of the same Envoy CPU limits, memory and replicas",
        )
    rows = []
    for key in keys_a + [k for k in keys_b if k not in keys_a]:
        config_a, config_b = a.config(key), b.config(key)
        knee_a, knee_b = _valid_knee(config_a), _valid_knee(config_b)
        if knee_a is not None and config_b is not None:
            regression = knee_b is None or (knee_b - knee_a) / knee_a * 100 < -threshold_pct
        else:
            regression = False
        rows.append(
            ComparisonRow(
                label=(config_a or config_b).label,  # type: ignore[union-attr]
                knee_a=knee_a,
                knee_b=knee_b,
                status_a=config_a.status if config_a else None,
                status_b=config_b.status if config_b else None,
                regression=regression,
            )
        )
    return Comparison(a.run_id, b.run_id, threshold_pct, tuple(rows))


def format_comparison(comparison: Comparison) -> str:
    """A plain-text table and a verdict line, for the terminal and CI logs."""
    header = ("Configuration", "Knee A (RPS)", "Knee B (RPS)", "Change", "")
    body = [
        (r.label, fmt.rps(r.knee_a), fmt.rps(r.knee_b), fmt.signed_percent(r.change_pct), r.note)
        for r in comparison.rows
    ]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        text = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:4], widths[1:4], strict=True)]
        return "  ".join([*text, cells[4]]).rstrip()

    lines = [f"A: {comparison.run_a}", f"B: {comparison.run_b}", "", line(header)]
    lines += [line(row) for row in body]
    regressions = comparison.regressions
    if regressions:
        lines.append(
            f"\n{len(regressions)} regression(s) beyond -{comparison.threshold_pct:g}%: "
            + ", ".join(r.label for r in regressions)
        )
    else:
        lines.append(f"\nno regression beyond -{comparison.threshold_pct:g}%")
    return "\n".join(lines)

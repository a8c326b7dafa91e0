"""Two runs side by side, pure: the knee of each matching configuration, its change in percent, and whether the
runs' own noise can resolve that change.

Each run with interleaved rounds measured its machine's drift with a control window (runner.figures.
control_drift): a change between two runs' knees is resolvable when it is larger than both runs' drift
(ControlDrift.resolves). A regression is a knee that fell by more than the threshold and that the drift can
resolve (a run without a control window is judged by the threshold alone, and the output says so), or a
configuration that had a valid knee in the first run and has none in the second (failed, invalid or not
saturated): a CI gate must not pass that. When both runs measured the same control (same configuration, same
rate), the control's own change says how far the machines differed between the runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.errors import UsageError
from runner.figures import ControlDrift, control_drift
from runner.model import ConfigResult, RunSummary
from runner.report import formatting as fmt

__all__ = ["DEFAULT_THRESHOLD_PCT", "Comparison", "ComparisonRow", "compare_runs", "format_comparison"]

DEFAULT_THRESHOLD_PCT = 5.0
SAME_RATE = 0.01  # two controls offered within 1% of each other measured the same rate


def _valid_knee(config: ConfigResult | None) -> float | None:
    knee = config.valid_knee if config is not None else None
    return knee.rps if knee is not None else None


@dataclass(frozen=True)
class ComparisonRow:
    """One configuration key in either run; `resolvable` None when a run has no control window to judge by."""

    label: str
    knee_a: float | None
    knee_b: float | None
    status_a: str | None
    status_b: str | None
    regression: bool
    resolvable: bool | None = None

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
        if self.regression:
            return "regression"
        return "within the runs' drift" if self.resolvable is False else ""


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    threshold_pct: float
    rows: tuple[ComparisonRow, ...]
    drift_a: ControlDrift | None = None
    drift_b: ControlDrift | None = None
    control_change: float | None = None  # B's control CPU per request over A's - 1, when both measured the same

    @property
    def regressions(self) -> list[ComparisonRow]:
        return [r for r in self.rows if r.regression]


def _resolvable(change: float, drift_a: ControlDrift | None, drift_b: ControlDrift | None) -> bool | None:
    """Whether a change (0.1: 10%) is larger than both runs' drift; None when a run measured none."""
    if drift_a is None or drift_b is None:
        return None
    return drift_a.resolves(change) and drift_b.resolves(change)


def _control_change(
    a: RunSummary, b: RunSummary, drift_a: ControlDrift | None, drift_b: ControlDrift | None
) -> float | None:
    """How much more CPU per request B's control cost than A's, when both measured one configuration at one rate."""
    if drift_a is None or drift_b is None or a.rounds is None or b.rounds is None:
        return None
    control_a, control_b = a.rounds.control, b.rounds.control
    if control_a is None or control_b is None or control_a.key != control_b.key:
        return None
    if abs(control_b.offered / control_a.offered - 1) > SAME_RATE:
        return None
    return drift_b.median_us / drift_a.median_us - 1


def _check(a: RunSummary, b: RunSummary, threshold_pct: float) -> None:
    if not math.isfinite(threshold_pct) or threshold_pct < 0:
        raise UsageError(f"--threshold-pct must be 0 or more, got {threshold_pct:g}", "e.g. --threshold-pct 5")
    for name, run in (("A", a), ("B", b)):
        if not any(_valid_knee(c) is not None for c in run.configs):
            raise UsageError(
                f"run {name} ({run.run_id}) has no valid knee to compare",
                "compare runs whose sweeps reached the threshold (see their reports)",
            )
    if not {c.key for c in a.configs} & {c.key for c in b.configs}:
        raise UsageError(
            f"runs {a.run_id} and {b.run_id} share no configuration",
            "compare two sweeps of the same Envoy CPU limits, memory and replicas",
        )


def compare_runs(a: RunSummary, b: RunSummary, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Comparison:
    """Match configurations by key; UsageError when the runs cannot be compared at all."""
    _check(a, b, threshold_pct)
    drift_a, drift_b = control_drift(a), control_drift(b)
    keys_a = [c.key for c in a.configs]
    rows = []
    for key in keys_a + [c.key for c in b.configs if c.key not in keys_a]:
        config_a, config_b = a.config(key), b.config(key)
        knee_a, knee_b = _valid_knee(config_a), _valid_knee(config_b)
        regression, resolvable = False, None
        if knee_a is not None and knee_b is not None:
            change = knee_b / knee_a - 1
            resolvable = _resolvable(change, drift_a, drift_b)
            regression = change * 100 < -threshold_pct and resolvable is not False
        elif knee_a is not None and config_b is not None:
            regression = True
        label = config_a.label if config_a is not None else config_b.label if config_b is not None else key
        rows.append(
            ComparisonRow(
                label=label,
                knee_a=knee_a,
                knee_b=knee_b,
                status_a=config_a.status if config_a else None,
                status_b=config_b.status if config_b else None,
                regression=regression,
                resolvable=resolvable,
            )
        )
    return Comparison(
        a.run_id, b.run_id, threshold_pct, tuple(rows), drift_a, drift_b, _control_change(a, b, drift_a, drift_b)
    )


def _drift(drift: ControlDrift | None) -> str:
    if drift is None:
        return "one pass or no control window: its machine's drift was not measured"
    return f"its machine moved +-{drift.spread:.1%} during the run ({len(drift.rounds)} rounds of the control window)"


def _verdict(comparison: Comparison) -> list[str]:
    judged = "both runs' drift" if comparison.drift_a and comparison.drift_b else "the threshold alone"
    regressions = comparison.regressions
    if regressions:
        lines = [
            f"{len(regressions)} regression(s) beyond -{comparison.threshold_pct:g}%, judged by {judged}: "
            + ", ".join(r.label for r in regressions)
        ]
    else:
        lines = [f"no regression beyond -{comparison.threshold_pct:g}%, judged by {judged}"]
    unresolved = [
        r for r in comparison.rows if r.resolvable is False and (r.change_pct or 0) < -comparison.threshold_pct
    ]
    if unresolved:
        lines.append("within the runs' drift, so not called regressions: " + ", ".join(r.label for r in unresolved))
    return lines


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

    lines = [
        f"A: {comparison.run_a}: {_drift(comparison.drift_a)}",
        f"B: {comparison.run_b}: {_drift(comparison.drift_b)}",
    ]
    if comparison.control_change is not None:
        lines.append(
            f"the control window (one configuration at one rate in both runs) cost {comparison.control_change:+.1%} "
            "CPU per request in B: the machines themselves differed by that much"
        )
    lines += ["", line(header), *(line(row) for row in body), ""]
    lines += _verdict(comparison)
    return "\n".join(lines)

"""`compare`: knees side by side, change in percent, regressions beyond the threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import UsageError
from runner.figures import control_drift
from runner.model import RunSummary
from runner.report.compare import compare_runs, format_comparison
from runner.results import load_summary
from support.report_data import KNEE_150M, KNEE_300M, fixture_summary


def _slower(factor_150m: float, factor_300m: float = 1.0) -> RunSummary:
    summary = fixture_summary()
    summary.run_id = "run-b"
    summary.configs[0].knee = summary.configs[0].knee.model_copy(
        update={"rps": summary.configs[0].knee.rps * factor_150m}
    )
    summary.configs[1].knee = summary.configs[1].knee.model_copy(
        update={"rps": summary.configs[1].knee.rps * factor_300m}
    )
    return summary


def test_same_run_has_no_change_and_no_regression():
    comparison = compare_runs(fixture_summary(), fixture_summary())
    assert [r.change_pct for r in comparison.rows] == [0.0, 0.0]
    assert comparison.regressions == []


def test_a_knee_lower_beyond_the_threshold_is_a_regression():
    comparison = compare_runs(fixture_summary(), _slower(0.90, 1.03), threshold_pct=5)
    first, second = comparison.rows
    assert first.knee_a == KNEE_150M and first.knee_b == pytest.approx(KNEE_150M * 0.9)
    assert first.change_pct == pytest.approx(-10.0)
    assert second.change_pct == pytest.approx(3.0)
    assert [r.label for r in comparison.regressions] == ["Envoy 150m CPU / 256Mi, nginx x1"]
    assert first.resolvable is None  # runs of one pass: no control window to judge by
    text = format_comparison(comparison)
    assert "-10.0%" in text and "+3.0%" in text
    assert "1 regression(s) beyond -5%, judged by the threshold alone: Envoy 150m CPU / 256Mi, nginx x1" in text
    assert "A: 20261122-125816-local: one pass or no control window: its machine's drift was not measured" in text


def test_threshold_decides():
    assert compare_runs(fixture_summary(), _slower(0.90), threshold_pct=15).regressions == []
    assert len(compare_runs(fixture_summary(), _slower(0.949), threshold_pct=5).regressions) == 1
    assert compare_runs(fixture_summary(), _slower(0.951), threshold_pct=5).regressions == []


def test_a_lost_knee_is_a_regression_and_unmatched_configs_are_listed():
    b = fixture_summary()
    b.configs[1].status = "invalid"
    b.configs[1].reason = "add Locust workers: generator at 97% CPU"
    extra = b.configs[0].model_copy(update={"key": "envoy=450m/256Mi,contour=-,nginx=1", "label": "Envoy 450m"})
    b.configs.append(extra)
    comparison = compare_runs(fixture_summary(), b)
    notes = {r.label: (r.note, r.regression) for r in comparison.rows}
    assert notes["Envoy 300m CPU / 256Mi, nginx x1"] == ("no valid knee in B (invalid)", True)
    assert notes["Envoy 450m"] == ("only in B", False)
    assert comparison.rows[1].knee_a == KNEE_300M and comparison.rows[1].knee_b is None


def test_runs_that_cannot_be_compared_are_usage_errors():
    other = fixture_summary()
    for config in other.configs:
        config.key += "-other"
    with pytest.raises(UsageError, match="share no configuration"):
        compare_runs(fixture_summary(), other)
    empty = fixture_summary()
    for config in empty.configs:
        config.status = "failed"
    with pytest.raises(UsageError, match=r"run B .* has no valid knee"):
        compare_runs(fixture_summary(), empty)
    with pytest.raises(UsageError, match="--threshold-pct must be 0 or more"):
        compare_runs(fixture_summary(), fixture_summary(), threshold_pct=-1)


def _lower(summary: RunSummary, factor: float) -> RunSummary:
    """The run with every valid knee `factor` times what it measured (its windows, and so its drift, unchanged)."""
    changed = summary.model_copy(deep=True)
    changed.run_id = "run-b"
    for config in changed.configs:
        if config.knee is not None:
            config.knee = config.knee.model_copy(update={"rps": config.knee.rps * factor})
    return changed


def test_with_control_windows_a_difference_within_the_runs_drift_is_not_a_regression(simulated_rounds_run: Path):
    a = load_summary(simulated_rounds_run)
    drift = control_drift(a)
    assert drift is not None and 0.005 < drift.spread < 0.05, drift
    inside = 1 - 1.5 * drift.spread  # a fall smaller than twice the drift: ControlDrift.resolves says no
    beyond = 1 - 3 * drift.spread
    small = compare_runs(a, _lower(a, inside), threshold_pct=drift.spread * 100)
    assert small.regressions == [] and all(r.resolvable is False for r in small.rows)
    assert all(r.note == "within the runs' drift" for r in small.rows)
    text = format_comparison(small)
    assert f"its machine moved +-{drift.spread:.1%} during the run (5 rounds of the control window)" in text
    assert "within the runs' drift, so not called regressions: " in text
    large = compare_runs(a, _lower(a, beyond), threshold_pct=drift.spread * 100)
    assert len(large.regressions) == len(a.configs) and all(r.resolvable for r in large.rows)
    assert "judged by both runs' drift" in format_comparison(large)


def test_the_same_control_in_both_runs_says_how_far_the_machines_differed(simulated_rounds_run: Path):
    a = load_summary(simulated_rounds_run)
    slower = a.model_copy(deep=True)
    control = slower.rounds.control  # type: ignore[union-attr]
    for config in slower.configs:
        if config.key == control.key:  # type: ignore[union-attr]
            config.steps = [s.model_copy(update={"envoy_cpu_cores": s.envoy_cpu_cores * 1.12}) if s.control else s
                            for s in config.steps]  # fmt: skip
    comparison = compare_runs(a, slower)
    assert comparison.control_change == pytest.approx(0.12)
    assert "the control window (one configuration at one rate in both runs) cost +12.0% CPU per request in B" in (
        format_comparison(comparison)
    )

"""`compare`: knees side by side, change in percent, regressions beyond the threshold."""

from __future__ import annotations

import pytest
from report_data import KNEE_150M, KNEE_300M, fixture_summary

from runner.errors import UsageError
from runner.model import RunSummary
from runner.report.compare import compare_runs, format_comparison


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
    text = format_comparison(comparison)
    assert "-10.0%" in text and "+3.0%" in text
    assert "1 regression(s) beyond -5%: Envoy 150m CPU / 256Mi, nginx x1" in text


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

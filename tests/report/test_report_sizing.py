"""The sizing fit and `recommend`: exact figures from hand-computed least squares."""

from __future__ import annotations

import numpy
import pytest
from report_data import KNEE_150M, KNEE_300M, THREE_LIMITS_RUN, fixture_summary

from runner.errors import UsageError
from runner.report.sizing import (
    KneePoint,
    check_request,
    example_targets,
    fit_knees,
    format_recommendation,
    knee_points,
    recommend,
    require_fit,
)
from runner.results import load_summary

MIB = 2**20


def _point(cores: float, rps: float, memory_mib: float = 100, peak_rps: float | None = None) -> KneePoint:
    return KneePoint(f"Envoy {cores}", cores, rps, memory_mib * MIB, peak_rps if peak_rps is not None else rps * 1.05)


THREE = [_point(1, 1000), _point(2, 2100), _point(3, 2900)]


def test_least_squares_slope_intercept_and_r_squared():
    fit = fit_knees(THREE)
    # mean x 2, mean y 2000, Sxx 2, Sxy 1900; residuals -50, +100, -50
    assert fit.slope == pytest.approx(950)
    assert fit.intercept == pytest.approx(100)
    assert fit.r_squared == pytest.approx(1 - 15_000 / 1_820_000)
    assert fit.cores_range == (1, 3) and fit.rps_range == (1000, 2900)
    assert fit.equation() == "knee RPS = 950 x cores + 100"
    assert fit.caveats() == []


def test_fit_of_the_real_run():
    fit = fit_knees(knee_points(fixture_summary()))
    assert fit.slope == pytest.approx((KNEE_300M - KNEE_150M) / 0.15)
    assert fit.slope == pytest.approx(8533.86, abs=0.01)
    assert fit.intercept == pytest.approx(KNEE_150M - 0.15 * fit.slope)
    assert fit.intercept == pytest.approx(-755.82, abs=0.01)
    assert fit.r_squared == 1.0
    assert any("two knees fit any line exactly" in c for c in fit.caveats())


def test_no_fit_from_knees_at_one_cpu_limit():
    assert fit_knees([]) is None
    assert fit_knees([_point(1, 1000), _point(1, 1100)]) is None


def test_poor_linearity_and_flat_knees_are_caveats():
    bent = fit_knees([_point(1, 1000), _point(2, 3000), _point(3, 3100), _point(4, 3000)])
    assert bent.r_squared < 0.95
    assert any("not linear" in c for c in bent.caveats())
    flat = fit_knees([_point(1, 1000), _point(2, 990), _point(3, 1000)])
    assert flat.slope <= 0 and "does not grow" in flat.caveats()[0]
    with pytest.raises(UsageError, match="does not grow with Envoy cores"):
        recommend(flat, 1000)


def test_recommend_within_the_measured_range():
    rec = recommend(fit_knees(THREE), 2000, 0.3)
    assert rec.required_rps == pytest.approx(2600)
    assert rec.cores_exact == pytest.approx(2500 / 950)  # 2.63
    assert rec.cpu_cores == pytest.approx(2.7) and rec.cpu == "2700m"
    assert rec.memory_bytes == 192 * MIB and rec.memory == "192Mi"  # 100 MiB x 1.3 = 130 MiB -> 3 x 64Mi
    assert not rec.extrapolated and rec.warnings == ()


def test_recommend_beyond_the_measured_range_warns():
    rec = recommend(fit_knees(THREE), 5000, 0.3)
    assert rec.cores_exact == pytest.approx(6400 / 950)
    assert rec.cpu == "6800m" and rec.extrapolated
    assert any(w.startswith("extrapolated 2.2x: 6,500 RPS needs 6.74 cores") for w in rec.warnings), rec.warnings
    assert any(w.endswith("confirm with a sweep whose Envoy CPU limits reach 6800m CPU") for w in rec.warnings)
    assert any("memory measured up to" in w for w in rec.warnings)


def test_rounding_up_is_exact_at_a_step_boundary():
    fit = fit_knees([_point(0.2, 200), _point(0.4, 400)])
    assert (300 - fit.intercept) / fit.slope == 0.30000000000000004  # what float arithmetic gives for 0.3 cores
    assert recommend(fit, 300, 0).cpu == "300m"  # not 400m
    assert recommend(fit, 301, 0).cpu == "400m"
    assert recommend(fit, 1, 0).cpu == "100m"  # never below one step


def test_recommend_on_the_real_run():
    rec = recommend(require_fit(fixture_summary()), 5000)
    assert rec.cpu == "900m"  # (6500 + 755.8) / 8533.9 = 0.850 cores
    assert rec.memory == "64Mi"
    text = format_recommendation(rec, "run-x")
    assert "cpu:     900m" in text and "0.850 cores by the fit" in text
    assert "fit: knee RPS = 8,534 x cores - 756 (R^2 1.000, 2 knees at 150m-300m), run run-x" in text
    assert "warning: extrapolated" in text


@pytest.mark.parametrize(
    ("target", "headroom", "message"),
    [(-5, 0.3, "positive"), (0, 0.3, "positive"), (float("nan"), 0.3, "positive"), (100, -0.1, "--headroom")],
)
def test_nonsense_requests_are_usage_errors(target: float, headroom: float, message: str):
    with pytest.raises(UsageError, match=message):
        check_request(target, headroom)
    with pytest.raises(UsageError, match=message):
        recommend(fit_knees(THREE), target, headroom)


def test_require_fit_says_why_there_is_no_fit():
    summary = fixture_summary()
    summary.configs[1].status = "invalid"
    summary.configs[1].reason = "add Locust workers: generator at 97% CPU"
    with pytest.raises(UsageError, match=r"valid knees at only one Envoy CPU limit \(150m\)") as one:
        require_fit(summary)
    assert "ENVOY_CPUS" in one.value.one_line()
    summary.configs[0].status = "not-saturated"
    with pytest.raises(UsageError, match=r"has no valid knee .*generator at 97% CPU"):
        require_fit(summary)


def test_only_saturated_knees_count():
    summary = fixture_summary()
    summary.configs[0].status = "invalid"  # keeps its knee figure, which must not be used
    assert [p.cpu_cores for p in knee_points(summary)] == [0.3]


def test_example_targets_follow_the_1_2_5_series_from_the_smallest_knee():
    assert example_targets(fit_knees([_point(0.15, 524), _point(0.3, 1804)])) == [1000, 2000, 5000, 10000]
    assert example_targets(fit_knees([_point(1, 1016), _point(6, 5401)])) == [2000, 5000, 10000, 20000]
    assert example_targets(fit_knees([_point(1, 1000), _point(2, 2000)])) == [1000, 2000, 5000, 10000]


def test_fit_and_recommend_on_a_real_three_limit_run():
    fit = require_fit(load_summary(THREE_LIMITS_RUN))
    cores, knees = [p.cpu_cores for p in fit.points], [p.rps for p in fit.points]
    assert [round(k) for k in knees] == [282, 970, 1762]
    slope, intercept = numpy.polyfit(cores, knees, 1)  # an independent least-squares fit
    assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
    assert fit.r_squared == pytest.approx(numpy.corrcoef(cores, knees)[0, 1] ** 2)
    assert fit.equation() == "knee RPS = 7,404 x cores - 476" and round(fit.r_squared, 3) == 0.998
    assert fit.caveats() == []
    within = recommend(fit, 1000)  # (1300 + 476) / 7404 = 0.240 cores
    assert within.cpu == "300m" and not within.extrapolated
    assert recommend(fit, 5000).cpu == "1"  # 0.942 cores, beyond 300m: extrapolated


def _measured(cores: float, rps: float, half: float) -> KneePoint:
    return KneePoint(f"Envoy {cores}", cores, rps, 100 * MIB, rps * 1.1, rps - half, rps + half)


def test_the_slope_interval_carries_the_knees_own_intervals():
    fit = fit_knees([_measured(1, 1000, 30), _measured(2, 2000, 60)])
    # slope = knee(2) - knee(1); its half-width = hypot(30, 60) = 67.08 (each knee's interval, propagated)
    assert fit.slope == pytest.approx(1000)
    assert fit.slope_interval == pytest.approx((1000 - 67.082, 1000 + 67.082), abs=0.01)
    assert fit.slope_text() == "1,000 RPS per core (95% CI 933-1,067)"
    rec = recommend(fit, 1500, 0.3)  # a knee of 1,950: 1.95 cores by the fit
    # the line pivots on the centroid (1.5 cores, 1,500 RPS): 1.5 + 450 / slope at either end
    assert rec.cores_interval == pytest.approx((1.5 + 450 / 1067.082, 1.5 + 450 / 932.918), abs=1e-4)
    assert "1.950 cores by the fit; 1.92-1.98 within the slope's 95% interval" in format_recommendation(rec, "r")


def test_three_knees_without_intervals_get_the_scatter_with_students_t():
    fit = fit_knees(THREE)
    # residual sd sqrt(15,000 / 1) = 122.47; se = 122.47 / sqrt(Sxx = 2) = 86.60; t(0.975, 1 dof) = 12.706
    assert fit.slope_interval == pytest.approx((950 - 1100.4, 950 + 1100.4), abs=0.5)


def test_two_knees_without_intervals_have_no_slope_interval():
    assert fit_knees([_point(1, 1000), _point(2, 2000)]).slope_interval is None


def test_the_slopes_interval_from_two_knees_needs_both_intervals_and_grows_with_them():
    a = KneePoint("a", 0.25, 650, 1e7, 700, 620, 680)  # +-30 RPS
    b = KneePoint("b", 0.5, 1450, 1e7, 1500, 1400, 1500)  # +-50 RPS
    fit = fit_knees([a, b])
    assert fit.slope == pytest.approx(3200)
    # the slope is (b - a) / 0.25: its half-width is sqrt(30^2 + 50^2) / 0.25
    half = (30**2 + 50**2) ** 0.5 / 0.25
    assert fit.slope_interval == pytest.approx((3200 - half, 3200 + half))
    interpolated = KneePoint("b", 0.5, 1450, 1e7, 1500)  # no interval
    assert fit_knees([a, interpolated]).slope_interval is None

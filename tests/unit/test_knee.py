"""The knee (a power-law fit with its confidence interval, or an interpolation) and the capacity."""

import math

import numpy as np
import pytest
from scipy import stats

from runner.capacity import find_capacity
from runner.knee import find_knee, fit_windows, power_fit
from runner.model import Finding
from support.steps import make_step


def _power_windows(exponent: float, knee: float, rates: list[float], noise: list[float] | None = None) -> list:
    """Windows on utilization = 0.9 x (rps / knee) ** exponent, times (1 + noise)."""
    noise = noise or [0.0] * len(rates)
    return [
        make_step(i, users=round(r / 20), rps=r, target_rps=r, utilization=0.9 * (r / knee) ** exponent * (1 + e))
        for i, (r, e) in enumerate(zip(rates, noise, strict=True))
    ]


def test_a_noise_free_power_law_gives_its_knee_and_exponent_exactly():
    steps = _power_windows(0.75, 1200.0, [700, 900, 1100, 1250, 1300])
    result = find_knee(steps, 0.90)
    # 700 RPS sits at 60% utilization: once four windows lie near the threshold (>= 0.75 x 90%), only
    # those are fitted
    assert result.knee.method == "power-fit" and result.knee.windows == 4
    assert result.knee.rps == pytest.approx(1200.0) and result.knee.exponent == pytest.approx(0.75)
    assert result.knee.low == pytest.approx(1200.0) and result.knee.high == pytest.approx(1200.0)  # no scatter


def test_the_interval_is_the_set_where_the_fitted_mean_cannot_be_told_from_the_threshold():
    noise = [0.02, -0.015, 0.01, -0.02, 0.012, -0.005]
    steps = _power_windows(0.8, 1000.0, [800, 860, 930, 990, 1040, 1080], noise)
    knee = find_knee(steps, 0.90).knee
    # Independently: on a grid of log RPS, keep the points where |fit - log 0.9| <= t * se(fit) (95%).
    x = np.log([s.rps for s in steps])
    y = np.log([s.cpu_utilization_mean for s in steps])
    slope, intercept = np.polyfit(x, y, 1)
    sd = np.sqrt(((y - (intercept + slope * x)) ** 2).sum() / (len(x) - 2))
    t = stats.t.ppf(0.975, len(x) - 2)
    grid = np.linspace(np.log(700), np.log(1300), 200_001)
    se = sd * np.sqrt(1 / len(x) + (grid - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum())
    inside = grid[np.abs(intercept + slope * grid - np.log(0.9)) <= t * se]
    assert knee.low == pytest.approx(math.exp(inside.min()), rel=1e-4)
    assert knee.high == pytest.approx(math.exp(inside.max()), rel=1e-4)
    assert knee.low < knee.rps < knee.high
    assert knee.half_width == pytest.approx(max(knee.rps - knee.low, knee.high - knee.rps) / knee.rps)


def test_guarded_underserved_and_saturated_windows_stay_out_of_the_fit():
    clean = _power_windows(0.8, 1000.0, [800, 900, 950, 1020, 1060], [0.01, -0.01, 0.005, -0.005, 0.0])
    finding = Finding(guard="failures", detail="5% failed", advice="check")
    outliers = [
        make_step(10, users=45, rps=900, target_rps=900, utilization=0.5, guards=(finding,)),
        make_step(11, users=50, rps=700, target_rps=1000, utilization=0.6),  # 70% delivered
        make_step(12, users=60, rps=1100, target_rps=1100, utilization=0.99),  # at the cap
    ]
    assert [s.index for s in fit_windows([*clean, *outliers], 0.9)] == [s.index for s in clean]
    assert find_knee([*clean, *outliers], 0.9).knee.rps == pytest.approx(find_knee(clean, 0.9).knee.rps)


def test_two_windows_are_interpolated_without_an_interval():
    steps = [
        make_step(0, users=4, rps=4300, utilization=0.64),
        make_step(1, users=8, rps=5700, utilization=0.80),
        make_step(2, users=12, rps=6700, utilization=0.92),
    ]
    result = find_knee(steps, 0.90)  # 0.64 is below the fit's floor (half the threshold: 0.45)... so 3 windows
    assert result.knee.method == "power-fit"
    few = find_knee(steps[1:], 0.90)
    assert few.knee.method == "interpolated" and few.knee.low is None and few.knee.half_width is None
    assert few.knee.rps == pytest.approx(5700 + (0.10 / 0.12) * 1000)
    assert few.knee.users == pytest.approx(11.3, abs=0.05)
    assert [s.index for s in few.bracket] == [1, 2]


def test_steps_measured_out_of_order_still_bracket_by_offered_load():
    steps = [
        make_step(0, users=10, rps=1000, utilization=0.50, target_rps=1000),
        make_step(1, users=40, rps=1800, utilization=1.00, target_rps=4000),
        make_step(2, users=17, rps=1700, utilization=0.86, target_rps=1700),
        make_step(3, users=18, rps=1750, utilization=0.93, target_rps=1750),
    ]
    result = find_knee(steps, 0.90)
    assert [s.index for s in result.bracket] == [2, 3]
    assert 1700 < result.knee.rps < 1750


def test_a_power_fit_needs_two_distinct_rates():
    assert power_fit([(100.0, 0.5)] * 3) is None


def test_no_knee_when_the_threshold_is_never_reached_says_why():
    steps = [make_step(i, users=u, rps=u * 100, utilization=u / 20) for i, u in enumerate((2, 4, 8))]
    result = find_knee(steps, 0.90)
    assert result.knee is None
    assert "peaked at 40%" in result.reason and "offer more load" in result.reason


def test_no_knee_when_the_first_step_is_already_above():
    result = find_knee([make_step(0, users=1, rps=900, utilization=0.97)], 0.90)
    assert result.knee is None and "start the search lower" in result.reason


def test_no_steps_is_not_a_knee():
    assert find_knee([], 0.9).reason == "no step was measured"


def _window(offered: float, rps: float, p99: float, **fields: object):
    return make_step(0, users=round(offered / 20), rps=rps, target_rps=offered, utilization=0.9, p99_ms=p99, **fields)


def test_capacity_is_the_highest_served_rate_below_the_first_that_broke():
    steps = [_window(1000, 1000, 30), _window(1100, 1099, 80), _window(1200, 1130, 400), _window(1300, 1140, 900)]
    capacity = find_capacity(steps, slo_ms=250)
    assert (capacity.rps, capacity.broken_at) == (1100, 1200)
    assert capacity.broken_by == "delivered 1,130 of 1,200 offered RPS (94%)"
    assert capacity.resolution == pytest.approx(1200 / 1100 - 1)


def test_latency_over_the_slo_breaks_capacity_even_when_every_request_is_served():
    steps = [_window(1000, 1000, 30), _window(1100, 1100, 300)]
    capacity = find_capacity(steps, slo_ms=250)
    assert (capacity.rps, capacity.broken_at) == (1000, 1100)
    assert capacity.broken_by == "p99 300 ms at 1,100 RPS, over the 250 ms SLO"


def test_a_served_rate_above_a_broken_one_does_not_count():
    steps = [_window(1000, 1000, 30), _window(1100, 1000, 30), _window(1200, 1200, 30)]  # noise at 1,200
    assert find_capacity(steps, slo_ms=250).rps == 1000


def test_capacity_not_reached_and_not_judged():
    unbroken = find_capacity([_window(1000, 1000, 30), _window(1100, 1100, 40)], slo_ms=250)
    assert unbroken.rps == 1100 and unbroken.broken_at is None and unbroken.resolution is None
    generator_bound = _window(1000, 800, 30, generator_cpu_max=0.95)
    assert find_capacity([generator_bound], slo_ms=250) is None  # the generator, not Envoy, fell short
    closed_loop = make_step(0, users=8, rps=900, utilization=0.9)
    assert find_capacity([closed_loop], slo_ms=250) is None


def test_a_knee_is_fitted_even_when_noise_puts_the_lowest_rate_past_the_threshold():
    # as measured at 250m: 500 RPS read 80% once and 95% later; no clean bracket by offered load
    rates = [500, 500, 526, 532, 566, 585, 524]
    utilization = [0.80, 0.951, 0.85, 0.889, 0.929, 0.942, 0.945]
    steps = [make_step(i, users=r // 5, rps=r, target_rps=r, utilization=u) for i, (r, u) in
             enumerate(zip(rates, utilization, strict=True))]  # fmt: skip
    steps[1] = steps[1].model_copy(update={"target_rps": 499.5})  # offered just under the first
    result = find_knee(steps, 0.90)
    assert result.knee is not None and result.knee.method == "power-fit"
    assert 500 < result.knee.rps < 566


def test_a_break_that_its_own_round_served_past_is_a_transient_not_the_capacity():
    steps = [_window(500, 483, 8), _window(1000, 1000, 30), _window(1100, 1100, 80), _window(1200, 1100, 500)]
    capacity = find_capacity(steps, slo_ms=250)  # taken literally, the first window broke it
    assert (capacity.rps, capacity.broken_at) == (1100, 1200)
    assert capacity.transients == (
        "delivered 483 of 500 offered RPS (97%) in round 1: a transient, 1,000-1,100 RPS were served in the same round",
    )


def test_an_interval_whose_bounds_pass_any_float_is_none_not_an_overflow():
    """Fieller's bounds divide by 1 - g: with g a hair under 1 (a slope barely told from zero) they reach past
    what a float holds; the fit says it bounds nothing instead of raising (it did, in bench/send_clustering.py)."""
    from runner.curve import PowerFit

    t = float(stats.t.ppf(0.975, 2))
    sxx, exponent = 0.02, 0.5
    sd = math.sqrt((1 - 1e-12) * sxx) * exponent / t  # g = (t sd / exponent)^2 / sxx = 1 - 1e-12
    fit = PowerFit(math.log(0.9) - exponent * math.log(1000), exponent, 4, sd, math.log(1000), sxx, (800.0, 1200.0))
    assert fit.interval(0.9) is None

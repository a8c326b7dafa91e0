"""Sizing and `recommend`: cores from the rate per core measured at a CPU limit, its interval carried into the
cores, computed here by hand; no straight line through the knees."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from runner.curve import Estimate
from runner.errors import UsageError
from runner.figures import Growth, knee_ratio, per_core_ratio
from runner.model import BackendResources, Capacity, ConfigResult, EnvoyResources, Knee, RunSummary
from runner.report.series import Scaling, Series, build_series, require_series
from runner.report.sizing import check_request, example_targets, format_recommendation, recommend, require_fit
from runner.results import load_summary
from support.report_data import KNEE_150M, KNEE_300M, THREE_LIMITS_RUN, fixture_summary
from support.steps import make_step

MIB = 2**20
DATA = Path(__file__).resolve().parent / "data"


def _config(cores: float, knee: float, half: float | None = None, capacity: Capacity | None = None) -> ConfigResult:
    interval = {"low": knee - half, "high": knee + half, "method": "rounds", "rounds": 5} if half else {}
    return ConfigResult(
        key=f"envoy={cores * 1000:.0f}m/256Mi,contour=-,nginx=1,arrivals=poisson",
        label=f"Envoy {cores * 1000:.0f}m",
        envoy=EnvoyResources(cpu_cores=cores, memory="256Mi", concurrency=1),
        backend=BackendResources(replicas=1),
        arrivals="poisson",
        accept_encoding="gzip",
        status="saturated",
        knee=Knee(rps=knee, **interval),  # type: ignore[arg-type]
        capacity=capacity,
        steps=[make_step(rps=knee * 1.05, envoy_memory_bytes=100 * MIB)],
    )


def _series(*configs: ConfigResult) -> Series:
    summary = RunSummary(run_id="r", platform="local", scenario="s", threshold=0.9, started_at="2026-11-25T00:00:00",
                         configs=list(configs))  # fmt: skip
    series = build_series(summary)
    assert series is not None
    return series


# knee per core 4,000 at 250m, 5,000 at 500m, 6,000 at 1 (+-3% each): faster than the limit, as Envoy under a quota
THREE = _series(_config(0.25, 1000, 30), _config(0.5, 2500, 75), _config(1.0, 6000, 180))


def test_a_measured_limit_whose_knee_reaches_the_target_is_the_answer():
    rec = recommend(THREE, 2400, 0)  # 250m's 4,000 per core would need 0.6 cores: 500m, which reaches 2,500
    assert rec.how == "measured" and rec.cpu == "500m" and rec.basis.cores == 0.5
    assert rec.cores_interval is None and rec.warnings == ()
    assert "(the knee of Envoy 500m CPU reaches 2,500 RPS: measured)" in format_recommendation(rec, "r")


def test_between_two_limits_the_lower_rate_per_core_sizes_it_capped_at_the_limit_that_reaches_it():
    rec = recommend(THREE, 3000, 0.3)  # a knee of 3,900, between 500m (2,500) and 1 (6,000)
    assert rec.how == "between" and rec.basis.cores == 0.5
    assert rec.cores_exact == pytest.approx(3900 / 5000)  # 500m's 5,000 per core, the lower of the two
    assert rec.cpu == "800m"
    # the interval: 3,900 over 500m's knee interval per core, 2,425-2,575 / 0.5
    assert rec.cores_interval == pytest.approx((3900 / 5150, 3900 / 4850))
    assert recommend(THREE, 4600, 0).cpu == "1"  # 4,600 / 5,000 = 0.92 -> 1000m, not past the 1 that reaches it


def test_beyond_the_largest_limit_its_rate_per_core_sizes_it_and_says_what_that_assumes():
    rec = recommend(THREE, 10_000, 0.3)  # a knee of 13,000
    assert rec.how == "beyond" and rec.basis.cores == 1.0
    assert rec.cores_exact == pytest.approx(13_000 / 6000) and rec.cpu == "2200m"
    assert rec.cores_interval == pytest.approx((13_000 / 6180, 13_000 / 5820))
    [warning, memory] = rec.warnings
    # one pass per configuration here: no interval on the per-core ratios, so no claim of conservatism
    assert warning.startswith("extrapolated 2.2x beyond the largest measured limit (1): sized at its rate per core")
    assert warning.endswith("how the knee grows past it is not known with an interval")
    assert memory.startswith("memory measured up to 6,300 RPS only")
    text = format_recommendation(rec, "run-x")
    assert text.splitlines()[0] == (
        "sized from 6,000 RPS per core (95% CI 5,820-6,180) at the knee of Envoy 1 CPU (6,000 RPS; 95% CI "
        "5,820-6,180 RPS, 5 interleaved rounds)"
    )
    assert "2.167 cores = 13,000 / 6,000 RPS per core; 2.104-2.234 within its 95% interval" in text
    assert "x cores" not in text and "intercept" not in text


def _with_growth(series: Series, value: float, low: float, high: float) -> Series:
    growth = Growth(Estimate(value, low, high, 5), tuple(r.cores for r in series.rates))
    scaling = Scaling(series.scaling.limits, series.scaling.per_core, growth)
    return Series(series.profile, series.arrivals, series.rates, scaling, series.compression)


def test_a_faster_growth_makes_the_largest_limits_rate_conservative_and_gives_a_second_answer():
    rec = recommend(_with_growth(THREE, 1.25, 1.2, 1.3), 10_000, 0.3)
    assert rec.how == "beyond" and rec.cores_exact == pytest.approx(13_000 / 6000)
    assert "conservative: the knee grows faster than the CPU limit (knee ~ cores^1.25" in rec.warnings[0]
    growth = rec.by_growth
    assert growth is not None and growth.cores == pytest.approx((13_000 / 6000) ** (1 / 1.25))
    corners = [(13_000 / k) ** (1 / g) for g in (1.2, 1.3) for k in (5820, 6180)]
    assert growth.interval == pytest.approx((min(corners), max(corners)))


def test_a_slower_growth_sizes_beyond_the_largest_limit_by_the_growth():
    rec = recommend(_with_growth(THREE, 0.8, 0.7, 0.9), 10_000, 0.3)
    assert rec.how == "growth" and rec.cores_exact == pytest.approx((13_000 / 6000) ** (1 / 0.8))
    assert rec.cpu == "2700m"  # 2.63 cores, where the rate per core would say 2.17
    assert "the knee grows slower than the CPU limit" in rec.warnings[0]


def test_below_the_smallest_limit_that_limit_is_the_answer():
    rec = recommend(THREE, 500, 0.3)
    assert rec.how == "below" and rec.cpu == "250m"
    assert rec.warnings[0] == (
        "below the smallest measured limit: 250m reaches 1,000 RPS, above the 650 needed; smaller limits were not "
        "measured"
    )


def test_a_capacity_below_the_knee_is_what_sizing_reads_there():
    broke = Capacity(rps=4000, broken_at=4200, broken_by="p99 400 ms at 4,200 RPS, over the 250 ms SLO")
    series = _series(_config(0.25, 1000, 30), _config(1.0, 6000, 180, capacity=broke))
    assert series.largest.source == "capacity" and series.largest.per_core == 4000
    assert series.largest.per_core_interval == (4000, 4200)  # served at 4,000, broken at 4,200
    rec = recommend(series, 10_000, 0.3)
    assert rec.cores_exact == pytest.approx(13_000 / 4000) and rec.cpu == "3300m"
    assert any(
        w.startswith("sized from the capacity: at 1 latency broke before the CPU threshold") for w in rec.warnings
    )
    assert format_recommendation(rec, "r").startswith("sized from 4,000 RPS per core at the capacity of Envoy 1 CPU")


def test_rounding_up_is_exact_at_a_step_boundary():
    series = _series(_config(0.1, 100), _config(0.2, 200))
    assert recommend(series, 300, 0).cpu == "300m"  # 300 / 1,000 per core: not 400m from float noise
    assert recommend(series, 301, 0).cpu == "400m"


def test_recommend_on_the_real_run():
    rec = recommend(require_fit(fixture_summary()), 5000)
    assert rec.cores_exact == pytest.approx(6500 / (KNEE_300M / 0.3))  # 1.081 cores at 300m's 6,014 per core
    assert rec.cpu == "1100m" and rec.memory == "64Mi" and rec.cores_interval is None  # one pass: no interval
    text = format_recommendation(rec, "run-x")
    assert text.splitlines()[0] == (
        "sized from 6,014 RPS per core at the knee of Envoy 300m CPU (1,804 RPS; no interval: one pass, interpolated "
        "between 2 windows)"
    )
    assert "1.081 cores = 6,500 / 6,014 RPS per core; no interval; rounded up to 100m" in text
    assert "run run-x: plain traffic (plain HTTP, keep-alive), synchronized arrivals; compression not recorded" in text
    assert "(knee per core against 150m: 300m 1.72x, one pass: no interval) show how the knee per core moved" in text


def test_one_limit_sizes_from_its_rate_per_core_and_says_the_growth_is_unknown():
    summary = fixture_summary()
    summary.configs[1].status = "invalid"
    rec = recommend(require_fit(summary), 1000, 0.3)
    assert rec.basis.cores == 0.15 and rec.cores_exact == pytest.approx(1300 / (KNEE_150M / 0.15))
    assert "one CPU limit measured, so how the rate per core changes with the limit is not known" in rec.warnings[0]


@pytest.mark.parametrize(
    ("target", "headroom", "message"),
    [(-5, 0.3, "positive"), (0, 0.3, "positive"), (float("nan"), 0.3, "positive"), (100, -0.1, "--headroom")],
)
def test_nonsense_requests_are_usage_errors(target: float, headroom: float, message: str):
    with pytest.raises(UsageError, match=message):
        check_request(target, headroom)
    with pytest.raises(UsageError, match=message):
        recommend(THREE, target, headroom)


def test_require_series_says_why_there_is_nothing_to_size_from():
    summary = fixture_summary()
    for config in summary.configs:
        config.status, config.reason = "invalid", "add Locust workers: generator at 97% CPU"
    with pytest.raises(UsageError, match=r"has no valid knee .*generator at 97% CPU") as none:
        require_series(summary)
    assert "ENVOY_CPUS" in none.value.one_line()
    with pytest.raises(UsageError, match="measured no traffic profile 'tls'"):
        require_series(fixture_summary(), "tls")


def test_only_saturated_knees_count():
    summary = fixture_summary()
    summary.configs[0].status = "invalid"  # keeps its knee figure, which must not be used
    assert [r.cores for r in require_series(summary).rates] == [0.3]


def test_example_targets_follow_the_1_2_5_series_from_the_smallest_rate():
    assert example_targets(_series(_config(0.15, 524), _config(0.3, 1804))) == [1000, 2000, 5000, 10000]
    assert example_targets(_series(_config(1, 1016), _config(6, 5401))) == [2000, 5000, 10000, 20000]
    assert example_targets(_series(_config(1, 1000), _config(2, 2000))) == [1000, 2000, 5000, 10000]


def test_sizing_on_a_real_three_limit_run():
    series = require_series(load_summary(THREE_LIMITS_RUN))
    assert [round(r.rps) for r in series.rates] == [282, 970, 1762]
    within = recommend(series, 1000)  # a knee of 1,300, between 200m (970) and 300m (1,762)
    lower = min(series.rates[1:], key=lambda r: r.per_core)  # 200m's 4,849 per core, below 300m's 5,875
    assert within.how == "between" and within.cores_exact == pytest.approx(1300 / lower.per_core)
    assert within.cpu == "300m"  # 0.268 cores, rounded up to 100m
    beyond = recommend(series, 5000)
    assert beyond.cpu == f"{math.ceil(6500 / (series.largest.rps / 0.3) * 10) * 100}m"  # 1.106 cores -> 1200m


def test_a_knee_the_rounds_fit_could_not_give_pairs_with_nothing():
    # a default run on the development VM (2026-11-26, the 4th of bench/repeatability.py --runs 5): 250m's windows
    # of rounds 3-5 stayed at 46-75% while the machine slowed and sped up by +-12%, so its knee is interpolated
    # with no interval; a paired ratio through those windows reached far past them (0.24-20.5, the bench printed)
    summary = load_summary(DATA / "local-rounds")
    low, high = sorted(summary.configs, key=lambda c: c.envoy.cpu_cores)
    assert low.knee is not None and low.knee.method == "interpolated" and low.knee.low is None
    assert high.knee is not None and high.knee.method == "rounds" and high.knee.low is not None
    assert knee_ratio(high, low, summary.threshold) is None and per_core_ratio(high, low, summary.threshold) is None
    assert knee_ratio(high, high, summary.threshold) is not None  # a rounds knee pairs (here with itself)

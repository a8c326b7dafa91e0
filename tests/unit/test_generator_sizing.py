"""WORKERS=auto: the calibrated worker count for the plan's largest Envoy limit, through the real CLI."""

from __future__ import annotations

import dataclasses
import math

import pytest

import runner.generator_sizing
from runner import calibrate, cli
from runner.errors import UsageError
from runner.generator_sizing import is_auto, load_sized
from runner.scenario import Overrides

# A heavy locustfile on a slow cluster: 662 RPS per worker core; Envoy 7,500 RPS per core (~133 µs per request).
HEAVY = calibrate.Calibration(
    platform="kubernetes",
    client="fasthttp",
    workers=2,
    generator_rps=1059.2,
    generator_cpu_share=0.8,
    rps_per_worker_core=662.0,
    envoy_cpu_cores=1.0,
    envoy_rps=7500.0,
    envoy_rps_per_core=7500.0,
)
SIX_CORES = Overrides(platform="kubernetes", client="fasthttp", envoy_cpus="1..6", workers="auto")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIZER_CACHE", str(tmp_path))


def test_auto_sizes_for_the_largest_configuration_by_hand():
    calibrate.save(HEAVY)
    scenario, note = load_sized("local", SIX_CORES)
    # 7,500 x 6 x 1.1 = 49,500 RPS offered; 662 x 0.75 = 496.5 per worker -> ceil(99.7) = 100
    assert scenario.load.workers == math.ceil(7500 * 6 * 1.1 / (662 * 0.75)) == 100
    assert note is not None and note.startswith("WORKERS=auto: 100 worker(s) = ceil(49,500 RPS (Envoy at 6 CPU")
    one_core = Overrides(platform="kubernetes", client="fasthttp", envoy_cpus="1", workers="auto")
    smaller, _ = load_sized("local", one_core)
    assert smaller.load.workers == 17  # ceil(8,250 / 496.5)


def test_auto_reads_and_validates_the_scenario_once(monkeypatch):
    calibrate.save(HEAVY)
    calls: list[str] = []

    def counted(name: str):
        real = getattr(runner.generator_sizing, name)
        return lambda *args, **kwargs: calls.append(name) or real(*args, **kwargs)

    for name in ("read_scenario", "parse_scenario"):
        monkeypatch.setattr(runner.generator_sizing, name, counted(name))
    scenario, _ = load_sized("local", SIX_CORES)
    assert scenario.load.workers == 100 and calls == [
        "read_scenario",
        "parse_scenario",
    ]  # the count then replaces load.workers


def test_plan_prints_the_sized_workers_and_how(capsys):
    calibrate.save(HEAVY)
    argv = ["plan", "--platform=kubernetes", "--client=fasthttp", "--envoy-cpus=1..6", "--workers=AUTO"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "load: fasthttp client (FastGatewayUser), 100 worker(s), rps mode" in out
    assert err.startswith("gateway-sizer: WORKERS=auto: 100 worker(s)")


def test_without_a_calibration_auto_says_what_to_run():
    with pytest.raises(UsageError) as error:
        load_sized("local", SIX_CORES)
    assert "run `gateway-sizer calibrate --platform kubernetes --client fasthttp --workers 2` first" in (
        error.value.one_line()
    )


def test_more_workers_than_the_bound_is_refused_like_any_workers_value():
    calibrate.save(HEAVY.__class__(**{**HEAVY.__dict__, "rps_per_worker_core": 100.0}))
    with pytest.raises(UsageError, match=r"load.workers \(WORKERS\): Input should be less than or equal to 256"):
        load_sized("local", SIX_CORES)


def test_only_auto_is_auto():
    assert is_auto("auto") and is_auto(" Auto ") and not is_auto("4") and not is_auto(None) and not is_auto("")


def test_auto_sizes_for_the_largest_fleet_from_envoys_cpu_per_request():
    # the calibration's users reached 3,000 RPS through a 1-core Envoy at 50%: 167 us per request, 5,400 RPS per core
    # at the knee; the largest fleet is 3 pods of 2 cores
    measured = dataclasses.replace(HEAVY, envoy_rps=3000.0, envoy_rps_per_core=3000.0, envoy_cpu_per_request_us=500 / 3)
    calibrate.save(measured)
    fleets = Overrides(platform="kubernetes", client="fasthttp", envoy_cpus="1,2", envoy_replicas="1,3", workers="auto")
    scenario, note = load_sized("local", fleets)
    assert scenario.load.workers == math.ceil(5400 * 6 * 1.1 / (662 * 0.75)) == 72
    assert note is not None and "the largest fleet, 3 pods x 2 CPU x 5,400 RPS per core at the knee" in note, note
    assert "Envoy's 167 us of CPU per request" in note and "a worker's 1,511 us of CPU per request" in note

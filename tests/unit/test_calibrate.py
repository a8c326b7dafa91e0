import pytest

from runner import calibrate
from runner.plan import plan_sweep
from runner.scenario import parse_scenario
from support.steps import make_step


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIZER_CACHE", str(tmp_path))


def _calibration(workers=2):
    scenario = parse_scenario(
        {"name": "t", "envoy": {"cpu": [0.3]}, "load": {"workers": workers, "client": "fasthttp"}}
    )
    direct = make_step(0, users=32, rps=8000, utilization=0.0)
    direct = direct.model_copy(update={"generator_cpu_max": 0.8})
    gateway = make_step(1, users=32, rps=3000, utilization=1.0)
    return scenario, calibrate.from_steps(scenario, direct, gateway, envoy_cpu=0.3)


def test_rps_per_worker_core_divides_by_workers_and_their_cpu():
    _, result = _calibration()
    assert result.rps_per_worker_core == pytest.approx(8000 / (2 * 0.8))
    assert result.envoy_rps_per_core == pytest.approx(10000)


def test_a_worker_held_to_half_a_core_counts_the_cpu_it_has():
    # generator_cpu_max is a share of the CPU a worker has: 80% of half a core is 0.4 cores busy, not 0.8
    scenario, _ = _calibration()
    direct = make_step(0, users=32, rps=8000, utilization=0.0).model_copy(update={"generator_cpu_max": 0.8})
    gateway = make_step(1, users=32, rps=3000, utilization=1.0)
    result = calibrate.from_steps(scenario, direct, gateway, envoy_cpu=0.3, worker_cores=0.5)
    assert result.rps_per_worker_core == pytest.approx(8000 / (2 * 0.8 * 0.5))


def test_workers_needed_keeps_each_worker_below_its_busy_target():
    _, result = _calibration()
    # Envoy at 3 cores takes ~30,000 RPS (+10%); a worker core gives 5,000 at 75% busy -> 3,750
    assert result.workers_needed(3.0) == 9
    assert result.workers_needed(0.3) == 1


def test_a_sweep_is_warned_only_when_its_workers_are_too_few():
    scenario, result = _calibration()
    calibrate.save(result)
    big = parse_scenario({"name": "t", "envoy": {"cpu": [1, 2, 3]}, "load": {"workers": 2, "client": "fasthttp"}})
    warning = calibrate.provisioning_warning(big, plan_sweep(big))
    assert warning is not None and "use WORKERS=9" in warning and "WORKERS=2 may saturate" in warning
    assert calibrate.provisioning_warning(scenario, plan_sweep(scenario)) is None
    lean = parse_scenario({"name": "t", "envoy": {"cpu": [3]}, "load": {"client": "lean"}})
    assert calibrate.provisioning_warning(lean, plan_sweep(lean)) is None  # no calibration for that client


def test_a_closed_loop_rate_the_generator_held_down_is_not_taken_for_envoys_knee():
    # through Envoy (1 core) the calibration's users reached 2,000 RPS with Envoy at 40%: 200 us of CPU per request.
    # Its knee per core is 0.9 core over that, 4,500 RPS, not the 2,000 the users reached
    scenario, _ = _calibration()
    direct = make_step(0, users=32, rps=8000, utilization=0.0).model_copy(update={"generator_cpu_max": 0.8})
    gateway = make_step(1, users=32, rps=2000, utilization=0.4)
    result = calibrate.from_steps(scenario, direct, gateway, envoy_cpu=1.0)
    assert result.envoy_cpu_per_request_us == pytest.approx(200)
    assert result.knee_per_core == pytest.approx(4500)
    assert result.generator_cpu_per_request_us == pytest.approx(1e6 * 2 * 0.8 / 8000)  # 200 us per request sent
    # a fleet of 6 cores: 4,500 x 6 x 1.1 = 29,700 RPS; a worker sends 5,000 per core, 3,750 at 75% busy -> 8
    assert result.workers_needed(6.0) == 8  # from the users' own rate it would have been ceil(13,200 / 3,750) = 4


def test_workers_are_sized_for_the_largest_fleet_its_pods_limits_together():
    _, result = _calibration()
    calibrate.save(result)
    fleets = parse_scenario(
        {"name": "t", "envoy": {"cpu": [0.5, 1], "replicas": [1, 3]}, "load": {"workers": 2, "client": "fasthttp"}}
    )
    assert calibrate.largest_fleet_cores(fleets) == 3.0
    warning = calibrate.provisioning_warning(fleets, plan_sweep(fleets))
    assert warning is not None and "largest fleet (3 CPU)" in warning and "use WORKERS=9" in warning

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

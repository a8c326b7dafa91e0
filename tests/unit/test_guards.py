from dataclasses import asdict, replace

from simulated_envoy import make_step

from runner.guards import GuardContext, check_step
from runner.knee import find_knee
from runner.sweep import judge

CONTEXT = GuardContext(threshold=0.90, workers=2)


def _names(step, previous=()):
    return [f.guard for f in check_step(step, list(previous), CONTEXT)]


def test_a_clean_step_fires_no_guard():
    assert _names(make_step(0, users=50, rps=1000, utilization=0.6, target_rps=1000)) == []


def test_generator_at_its_cpu_limit_names_workers_to_add():
    step = replace(make_step(0, users=50, rps=1000, utilization=0.5, target_rps=1000), generator_cpu_max=0.97)
    [finding] = check_step(step, [], CONTEXT)
    assert finding.guard == "generator-saturated"
    assert "97% CPU" in finding.detail and "WORKERS=3" in finding.advice


def test_offered_load_not_delivered_while_envoy_has_room():
    step = make_step(0, users=200, rps=3170, utilization=0.76, target_rps=3640)
    assert _names(step) == ["generator-shortfall"]
    saturated = make_step(0, users=200, rps=3170, utilization=0.99, target_rps=3640)
    assert _names(saturated) == []  # Envoy at its limit is the expected reason


def test_backend_cpu_and_flat_throughput():
    busy = replace(make_step(0, users=20, rps=400, utilization=0.3, target_rps=400), backend_cpu_max=0.95)
    assert _names(busy) == ["backend-saturated"]
    before = make_step(0, users=20, rps=1000, utilization=0.40, target_rps=1000)
    flat = make_step(1, users=40, rps=1010, utilization=0.41, target_rps=2000)
    assert "throughput-flat" in _names(flat, [before])


def test_failures_and_rps_mismatch():
    failing = replace(make_step(0, users=20, rps=400, utilization=0.3, target_rps=400), fail_ratio=0.03)
    assert _names(failing) == ["failures"]
    mismatch = replace(make_step(0, users=20, rps=400, utilization=0.3, target_rps=400), envoy_rps=460)
    assert _names(mismatch) == ["rps-mismatch"]
    throttled = replace(make_step(0, users=20, rps=400, utilization=0.97, target_rps=800), envoy_rps=460)
    assert "rps-mismatch" not in _names(throttled)  # a throttled Envoy is scraped late


def _guarded(step):
    return replace(step, guards=tuple(asdict(f) for f in check_step(step, [], CONTEXT)))


def test_a_knee_is_invalid_when_a_guard_fired_below_it_and_valid_when_only_above():
    low = _guarded(replace(make_step(0, users=10, rps=500, utilization=0.5, target_rps=500), fail_ratio=0.05))
    high = _guarded(make_step(1, users=20, rps=1000, utilization=0.95, target_rps=1000))
    status, reason = judge([low, high], find_knee([low, high], 0.90))
    assert status == "invalid" and reason.startswith("5.0% of requests failed")
    clean_low = _guarded(make_step(0, users=10, rps=500, utilization=0.5, target_rps=500))
    past = _guarded(replace(make_step(2, users=40, rps=1100, utilization=1.0, target_rps=2000), fail_ratio=0.2))
    assert judge([clean_low, high, past], find_knee([clean_low, high, past], 0.90)) == ("saturated", None)


def test_without_a_knee_the_guard_is_the_reason():
    step = _guarded(make_step(0, users=200, rps=3170, utilization=0.76, target_rps=3640))
    status, reason = judge([step], find_knee([step], 0.90))
    assert status == "invalid" and "load not delivered" in reason and "add Locust workers" in reason

"""Windows of real Envoy fleets read by this version of the meter, each pod against its own limit.

The windows were recorded on the local platform (tests/unit/data/pod_windows.json, by support.pod_windows: every
answer Prometheus and Locust gave the real meter); each is replayed through this version's meter. `main_steps` in
the same file is what the meter of main (before per-pod windows) made of the very same answers.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from runner.guards import GuardContext, check_step, limit_enforced
from runner.knee import find_knee
from runner.locust import Snapshot
from runner.measure import StepMeter
from runner.metrics import Metrics
from runner.model import LoadLevel, Step
from runner.platforms.local.layout import SELECTORS
from support.pod_windows import load, measure

DATA = Path(__file__).resolve().parent / "data" / "pod_windows.json"
RECORDED = load(DATA)
LIMIT: float = RECORDED["limit_cores"]
THRESHOLD = 0.9


def _steps(name: str) -> list[Step]:
    return [measure(window, LIMIT) for window in RECORDED["sets"][name]["windows"]]


def _summed(step: Step) -> Step:
    """The window as read before per-pod windows: the fleet's CPU over one pod's limit."""
    summed = step.envoy_cpu_cores / LIMIT
    return step.model_copy(
        update={"cpu_utilization_min": summed, "cpu_utilization_mean": summed, "cpu_utilization_max": summed}
    )


class ThreePodsAt30Percent(Metrics):
    """A stand-in for Prometheus (no server) answering the meter's queries: three Envoy pods whose CPU counters
    each grow 0.075 core-seconds a second over a 10 s window, 30% of a 250m limit; nothing else."""

    def __init__(self) -> None:
        super().__init__("http://three-pods")

    def _fetch(self, query: str, at: float) -> list[dict]:
        if not query.startswith('container_cpu_usage_seconds_total{namespace="projectcontour"'):
            return []
        return [
            {"metric": {"pod": f"envoy-{i}"}, "values": [[1000 + t, 5.0 + 0.075 * t] for t in range(11)]}
            for i in range(3)
        ]


def test_three_pods_at_30_percent_each_is_a_30_percent_window_not_90():
    meter = StepMeter(locust=None, metrics=ThreePodsAt30Percent(), selectors=SELECTORS, envoy_cpu_limit_cores=0.25)  # type: ignore[arg-type]
    snapshot = Snapshot(1011.0, "running", 30, {s: 300 for s in range(1000, 1010)}, {}, {2: 3000}, ())
    step = meter._step(0, LoadLevel(users=30, user_rps=10), 1000, 1010, snapshot, snapshot, 1.0)
    assert step.cpu_utilization_mean == pytest.approx(0.30)  # the busiest pod's, against its own limit
    assert step.envoy_cpu_cores == pytest.approx(0.225)  # the fleet's CPU: three pods' summed
    assert [p.cpu_utilization_mean for p in step.pods] == pytest.approx([0.30, 0.30, 0.30])


def test_recorded_three_pods_near_30_percent_read_as_their_busiest_pod_not_their_sum():
    for step in _steps("three-pods"):
        pods = [p.cpu_utilization_mean for p in step.pods]
        assert len(pods) == 3 and step.cpu_utilization_mean == max(pods)
        assert step.envoy_cpu_cores / LIMIT == pytest.approx(sum(pods), rel=1e-9)  # what the summed reading was
        assert step.cpu_utilization_mean < 0.5 * step.envoy_cpu_cores / LIMIT
    # the busiest recorded: three pods at 19%, 30% and 28% of their limits (the kernel spread 46 connections
    # unevenly), 77% of one pod's limit summed: a 30% window
    busiest = max(_steps("three-pods"), key=lambda s: s.envoy_cpu_cores)
    assert all(0.1 <= p.cpu_utilization_mean <= 0.35 for p in busiest.pods), busiest.pods
    assert busiest.cpu_utilization_mean <= 0.35 and busiest.envoy_cpu_cores / LIMIT >= 0.7


def test_one_pod_windows_read_exactly_what_main_read_from_the_same_answers():
    main = RECORDED["main_steps"]
    for window, before in zip(RECORDED["sets"]["one-pod"]["windows"], main["sets"]["one-pod"], strict=True):
        now = measure(window, LIMIT).model_dump(mode="json")
        assert {k: now[k] for k in before} == before, main["commit"]
        assert len(now["pods"]) == 1
    for window, before in zip(RECORDED["sets"]["two-pod-ramp"]["windows"], main["sets"]["two-pod-ramp"], strict=True):
        now = measure(window, LIMIT)  # the fleet's figures are what they were: RPS and CPU summed over the pods
        assert (now.rps, now.envoy_rps, now.envoy_cpu_cores) == (
            before["rps"],
            before["envoy_rps"],
            before["envoy_cpu_cores"],
        )


def test_the_fleet_knee_is_where_its_busiest_pod_crosses_the_summed_reading_stopped_at_about_half_the_load():
    steps = _steps("two-pod-ramp")
    knee = find_knee(steps, THRESHOLD).knee
    summed = find_knee([_summed(s) for s in steps], THRESHOLD).knee
    assert knee is not None and summed is not None
    # both pods near 45% when the sum read 90%, and Envoy's CPU per request falls with load: half the fleet's load or
    # less (recorded: 576 RPS against 1,422, 0.41)
    assert 0.3 <= summed.rps / knee.rps <= 0.6, (summed.rps, knee.rps)
    busiest = [s for s in steps if s.cpu_utilization_mean >= THRESHOLD]
    assert busiest and min(s.rps for s in busiest) >= knee.rps * 0.9  # the windows at the threshold lie past the knee


def test_a_fleet_at_its_limit_holds_every_pods_quota_and_the_guard_judges_each_pod():
    steps = _steps("two-pod-ramp")
    context = GuardContext(threshold=THRESHOLD, workers=1)
    at_limit = [s for s in steps if s.cpu_utilization_mean >= 0.95]
    assert at_limit and all(s.envoy_cpu_cores / LIMIT > 1.5 for s in at_limit)  # summed: 150% and more of a limit
    for step in steps:
        assert "cpu-limit-not-enforced" not in {f.guard for f in check_step(step, [], context)}, step.pods
        assert "cpu-limit-not-enforced" in {f.guard for f in check_step(_summed(step), [], context)} or (
            step.envoy_cpu_cores / LIMIT <= 1.03
        )
    assert limit_enforced(steps) is None  # no pod over its limit, and the pods at their limit throttled


def test_the_knee_per_pod_of_two_pods_times_two_over_the_imbalance_is_the_fleet_knee():
    from runner.fleet import pod_knee  # here: the other tests of this file also run on main, before runner.fleet

    steps = _steps("two-pod-ramp")
    found, _ = pod_knee(steps, THRESHOLD)
    fleet = find_knee(steps, THRESHOLD).knee
    assert found is not None and fleet is not None and found.pods == 2 and found.imbalance is not None
    assert 1.0 <= found.imbalance < 1.5
    assert 2 * found.knee.rps / found.imbalance == pytest.approx(fleet.rps, rel=0.15)
    assert all(math.isclose(sum(p.rps for p in s.pods), s.rps, rel_tol=1e-9) for s in steps)

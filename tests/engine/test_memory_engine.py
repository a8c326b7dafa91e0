"""The memory experiment's engine on the fake platform and clock (milliseconds): points in order after the knee
configurations, connections released and load stopped after every point, a point that fails kept with its
reason, `on_failure: stop`, and resume measuring only what is missing. The holder and the working set here are
fakes named as such; the real ones run in tests/local/test_memory_sweep.py and test_connection_holder.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runner.errors import PlatformError, StopRun
from runner.locust import HeldConnections
from runner.metrics import ENVOY_ACTIVE_CONNECTIONS, ENVOY_ALLOCATED, ENVOY_HEAP, Selector
from runner.plan import Configuration, plan_sweep
from runner.report.memory_fit import memory_fits
from runner.results import RunStore, load_summary
from runner.scenario import Scenario, parse_scenario
from runner.sweep import Sweep
from support.simulated import FakeClock, FakeLocust, FakeMetrics, FakePlatform, SimulatedEnvoy, Timeline

BASE, PER_CONNECTION, PER_ROUTE = 40e6, 44_000.0, 2_000.0
MEMORY = {"connections": [0, 1000, 4000], "routes": [0, 500], "hold_seconds": 10, "settle_seconds": 2, "rps": 20}


class FakeHoldingLocust(FakeLocust):
    """A fake connection holder: holds what it is asked for, up to `cap` (the rest fail)."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(timeline)
        self.cap: int | None = None
        self.count = 0
        self.holds: list[int] = []
        self.releases = 0

    def hold_connections(
        self, count: int, url: str, host_header: str, *, path: str = "/", refresh_s: float, open_rate: float
    ) -> HeldConnections:
        self.holds.append(count)
        self.count = count
        return self.connections()

    def connections(self) -> HeldConnections:
        held = self.count if self.cap is None else min(self.count, self.cap)
        return HeldConnections("holding", self.count, held, held, self.count - held, 0, 0, 0, None)

    def release_connections(self) -> None:
        self.releases += 1
        self.count = 0


class FakeMemoryMetrics(FakeMetrics):
    """A fake working set: BASE + PER_CONNECTION x held + PER_ROUTE x Envoy's extra routes."""

    def __init__(self, timeline: Timeline, platform: FakeMemoryPlatform) -> None:
        super().__init__(timeline)
        self.platform = platform

    def _working_set(self) -> float:
        holder = self.platform.locust
        routes = self.platform.applied[-1].extra_routes if self.platform.applied else 0
        return BASE + PER_CONNECTION * holder.connections().held + PER_ROUTE * routes

    def memory_working_set_mean_bytes(self, selector: Selector, start: float, end: float) -> float:
        return self._working_set()

    def envoy_gauge(self, template: str, selector: Selector, start: float, end: float) -> float:
        held = self.platform.locust.connections().held
        return {ENVOY_ACTIVE_CONNECTIONS: held + 4.0, ENVOY_HEAP: self._working_set() - 15e6,
                ENVOY_ALLOCATED: self._working_set() - 20e6}[template]  # fmt: skip


class FakeMemoryPlatform(FakePlatform):
    def __init__(self, clock: FakeClock, *, alive: Callable[[], None] = lambda: None) -> None:
        super().__init__(clock, lambda config: SimulatedEnvoy(limit_cores=config.envoy_cpu_cores))
        self._locust = FakeHoldingLocust(self.timeline)
        self._metrics = FakeMemoryMetrics(self.timeline, self)
        self.alive = alive

    @property
    def locust(self) -> FakeHoldingLocust:
        return self._locust

    def connection_holder(self) -> FakeHoldingLocust:
        return self._locust

    def memory_metrics(self) -> FakeMemoryMetrics:
        return self._metrics

    def check(self) -> None:
        self.alive()


def _scenario(**memory: object) -> Scenario:
    raw = {"name": "memory-engine", "envoy": {"cpu": [0.25], "memory": "1Gi"}, "load": {"workers": 1, "rounds": 1},
           "memory": {**MEMORY, **memory}}  # fmt: skip
    return parse_scenario(raw)


def _sweep(tmp_path: Path, scenario: Scenario, platform: FakePlatform, store: RunStore | None = None) -> Sweep:
    store = store or RunStore.create(scenario, tmp_path)
    return Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock)


def test_memory_points_run_after_the_knees_each_released_and_fitted(tmp_path):
    platform = FakeMemoryPlatform(FakeClock())
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "complete"
    summary = load_summary(sweep.store.run_dir)
    assert summary.configs[0].status == "saturated" and summary.memory is not None
    assert platform.applied[0].key == summary.configs[0].key  # the knee configuration first
    assert [config.extra_routes for config in platform.applied[1:]] == [0, 0, 0, 500]  # then the points in order
    assert [p.key for p in summary.memory.points] == [
        "connections=0,routes=0", "connections=1000,routes=0", "connections=4000,routes=0", "connections=0,routes=500"
    ]  # fmt: skip
    assert platform.locust.holds == [1000, 4000] and platform.locust.releases == 4  # after every point
    assert platform.locust.count == 0 and platform.timeline.users == 0  # nothing held, no load
    fits = memory_fits(summary.memory)
    assert fits.connections is not None and fits.connections.slope == pytest.approx(PER_CONNECTION)
    assert fits.routes is not None and fits.routes.slope == pytest.approx(PER_ROUTE)
    assert all(p.refresh_rps == p.connections / 25 for p in summary.memory.points)


def test_a_point_not_held_in_full_fails_with_its_reason_and_resume_measures_only_it(tmp_path):
    platform = FakeMemoryPlatform(FakeClock())
    platform.locust.cap = 3000
    scenario = _scenario(only=True)
    sweep = _sweep(tmp_path, scenario, platform)
    assert sweep.run() == "partial"
    summary = load_summary(sweep.store.run_dir)
    assert summary.memory is not None
    failed = summary.memory.point("connections=4000,routes=0")
    assert failed is not None and failed.status == "failed"
    assert "held 3,000 of 4,000 connections (failed 1,000" in (failed.reason or "")
    assert "1 of 4 configuration(s) and memory point(s) did not finish: memory: 4,000 held connections" in (
        summary.reason or ""
    )
    assert summary.memory.point("connections=0,routes=500") is not None  # on_failure: continue
    measured = {p.key: p for p in summary.memory.points if p.measured}

    again = FakeMemoryPlatform(FakeClock(platform.clock.now))
    resumed = _sweep(tmp_path, scenario, again, RunStore.open(sweep.store.run_dir))
    assert resumed.run() == "complete"
    assert again.locust.holds == [4000]  # only the failed point again
    after = load_summary(sweep.store.run_dir)
    assert after.memory is not None and all(p.measured for p in after.memory.points)
    assert all(after.memory.point(key) == point for key, point in measured.items())


def test_envoy_dying_fails_the_point_and_on_failure_stop_ends_the_experiment(tmp_path):
    platform = FakeMemoryPlatform(FakeClock())

    def envoy_dies_under_4000() -> None:
        if platform.locust.count >= 4000:
            raise PlatformError("envoy-local exited with code -9: OOM-killed at its memory limit")

    platform.alive = envoy_dies_under_4000
    sweep = _sweep(tmp_path, _scenario(only=True), platform)
    sweep.scenario = sweep.scenario.model_copy(update={"on_failure": "stop"})
    sweep.memory.scenario = sweep.scenario  # type: ignore[union-attr]
    assert sweep.run() == "partial"
    summary = load_summary(sweep.store.run_dir)
    assert summary.memory is not None
    keys = [p.key for p in summary.memory.points]
    assert keys == ["connections=0,routes=0", "connections=1000,routes=0", "connections=4000,routes=0"]  # stopped
    assert "OOM-killed" in (summary.memory.points[-1].reason or "")
    assert platform.locust.count == 0 and platform.locust.releases == 3  # released after the failure too


def test_memory_only_runs_no_knee_configuration(tmp_path):
    platform = FakeMemoryPlatform(FakeClock())
    sweep = _sweep(tmp_path, _scenario(only=True), platform)
    assert sweep.run() == "complete"
    assert load_summary(sweep.store.run_dir).configs == []
    assert all(isinstance(c, Configuration) and c.envoy_memory_bytes == 2**30 for c in platform.applied)


def test_a_stop_run_error_ends_the_experiment_at_once_and_keeps_the_points_measured(tmp_path):
    platform = FakeMemoryPlatform(FakeClock())
    stop = StopRun("Gateway(s) x created during the run", "the run stops")
    platform.fail_apply = lambda config: stop if len(platform.applied) == 2 else None  # the second point's apply
    sweep = _sweep(tmp_path, _scenario(only=True), platform)  # on_failure: continue
    with pytest.raises(StopRun):
        sweep.run()
    summary = load_summary(sweep.store.run_dir)
    assert summary.status == "failed" and summary.reason == "Gateway(s) x created during the run: the run stops"
    assert summary.memory is not None and [p.key for p in summary.memory.points] == ["connections=0,routes=0"]
    assert len(platform.applied) == 2 and platform.locust.count == 0 and platform.stopped == 1


def test_a_lost_lease_found_behind_another_error_ends_the_experiment_at_once(tmp_path):
    lost = StopRun("lease gateway-sizer on projectcontour/envoy was taken over by run other-run", "the run stops")

    def lease_gone() -> None:
        if len(platform.applied) >= 2:
            raise lost

    platform = FakeMemoryPlatform(FakeClock(), alive=lease_gone)
    platform.fail_apply = lambda config: PlatformError("patch refused") if len(platform.applied) == 2 else None
    sweep = _sweep(tmp_path, _scenario(only=True), platform)  # on_failure: continue
    with pytest.raises(StopRun):
        sweep.run()
    summary = load_summary(sweep.store.run_dir)
    assert summary.status == "failed" and summary.reason == lost.one_line()
    assert summary.memory is not None and [p.key for p in summary.memory.points] == ["connections=0,routes=0"]
    assert len(platform.applied) == 2 and platform.stopped == 1

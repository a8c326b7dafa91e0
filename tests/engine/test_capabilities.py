"""Optional platform capabilities are hooks that answer None when a platform lacks them (runner.platforms.base):
the memory model on a platform without a connection holder, or without memory queries, says so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import PlatformError
from runner.locust import HeldConnections, Snapshot
from runner.plan import plan_sweep
from runner.platforms.base import ConnectionHolder
from runner.results import RunStore, load_summary
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import FakeClock, FakeLocust, FakePlatform, SimulatedEnvoy

MEMORY = {"connections": [0], "hold_seconds": 10, "settle_seconds": 2, "rps": 20, "only": True}


class FakeIdleHolder:
    """A fake connection holder that is never asked to hold any (the point holds none)."""

    def __init__(self, locust: FakeLocust) -> None:
        self.locust = locust

    def hold_connections(
        self, count: int, url: str, host_header: str, *, path: str = "/", refresh_s: float, open_rate: float
    ) -> HeldConnections:
        raise AssertionError("no point holds connections")

    def connections(self) -> HeldConnections:
        return HeldConnections("idle", 0, 0, 0, 0, 0, 0, 0, None)

    def release_connections(self) -> None:
        pass

    def snapshot(self) -> Snapshot:
        return self.locust.snapshot()


class HolderWithoutMemoryQueries(FakePlatform):
    """A fake platform with a connection holder whose fake metrics have no memory queries."""

    def connection_holder(self) -> ConnectionHolder | None:
        return FakeIdleHolder(self._locust)


def _sweep(tmp_path: Path, platform: FakePlatform) -> Sweep:
    scenario = parse_scenario(
        {"name": "capabilities", "envoy": {"cpu": [0.25]}, "load": {"workers": 1, "rounds": 1}, "memory": MEMORY}
    )
    store = RunStore.create(scenario, tmp_path)
    return Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock)


def test_a_platform_without_a_connection_holder_fails_the_memory_model_in_one_line(tmp_path):
    platform = FakePlatform(FakeClock(), lambda config: SimulatedEnvoy(limit_cores=config.envoy_cpu_cores))
    assert platform.connection_holder() is None and platform.memory_metrics() is None
    sweep = _sweep(tmp_path, platform)
    with pytest.raises(PlatformError, match="the fake platform's load generator cannot hold connections"):
        sweep.run()
    assert load_summary(sweep.store.run_dir).status == "failed"


def test_a_platform_without_memory_queries_fails_each_point_with_the_reason(tmp_path):
    platform = HolderWithoutMemoryQueries(FakeClock(), lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores))
    sweep = _sweep(tmp_path / "run", platform)
    assert sweep.run() == "failed"
    memory = load_summary(sweep.store.run_dir).memory
    assert memory is not None and [p.status for p in memory.points] == ["failed"]
    assert memory.points[0].reason == "the fake platform's metrics lack the memory model's queries"

"""Overload proof on the real local platform: a load that opens connections without bound gets Envoy
OOM-killed at a memory limit, and the overload-manager settings `recommend` derives from a measured memory
fit keep Envoy alive at the same limit under the same load, refusing the excess connections."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests
import yaml

from runner.errors import PlatformError
from runner.locust import HeldConnections, LocustMaster, LocustOptions
from runner.paths import PROJECT_ROOT
from runner.platforms.local.envoy import Overload
from runner.platforms.local.testbed import LocalTestbed, LocustSetup
from runner.quantities import parse_memory
from support.processes import run_sizer
from support.scenarios import memory_scenario

HOST = "external.nginx"
SIZED_FOR = 1000  # connections recommend sizes the limit for
UNBOUNDED = 12_000  # what the load then opens: far beyond what the limit holds
OPEN_RATE = 4000
LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"


def _stat(testbed: LocalTestbed, name: str) -> int:
    text = requests.get(f"http://127.0.0.1:{testbed.ports.envoy_admin}/stats", params={"filter": name}).text
    return sum(int(line.rsplit(":", 1)[1]) for line in text.splitlines() if line.split(":")[0].endswith(name))


def _recommended(run_dir: Path) -> tuple[int, Overload]:
    """The memory limit and overload settings `recommend --connections` prints for the run's fits."""
    advice = run_sizer("recommend", "--connections", str(SIZED_FOR), "--run", str(run_dir))
    assert advice.returncode == 0, advice.stderr
    limit = re.search(r"^  memory:\s+(\S+)", advice.stdout, re.MULTILINE)
    local = re.search(r"local platform: envoy: (\{.*\})$", advice.stdout, re.MULTILINE)
    assert limit and local, advice.stdout
    settings = yaml.safe_load(local.group(1))["overload"]
    return parse_memory(limit.group(1)), Overload(settings["max_connections"], settings.get("max_heap"))


def _settle(master: LocustMaster, envoy_alive, timeout_s: float = 90.0) -> HeldConnections:
    """Wait until every connection was opened or refused, Envoy alive all along."""
    deadline = time.monotonic() + timeout_s
    while not (held := master.connections()).settled:
        assert time.monotonic() < deadline, held
        assert envoy_alive(), "Envoy died under its overload settings"
        time.sleep(0.5)
    return held


@pytest.mark.slow
@pytest.mark.parallel_safe  # memory, connection counts and an OOM kill: no CPU figure
@pytest.mark.nightly  # a minute of OOM kill and cap; the gate's memory sweep covers `recommend --connections`
def test_recommended_overload_settings_keep_envoy_alive_where_the_same_load_oom_kills_it(tmp_path, testbed_factory):
    # 1. a memory fit, measured with room to spare (the real CLI, a memory-only sweep at 1Gi). Three points are the
    # fewest that give the slope a 95% interval; a wider interval only raises the cost per connection the limit and
    # the cap are sized with, and the cap still admits SIZED_FOR (the limit is rounded up from the one under which
    # it does)
    scenario = memory_scenario(tmp_path, connections=[0, 1000, 3000], routes=[], memory="1Gi")
    sweep = run_sizer("sweep", "--scenario", str(scenario), "--free-ports", "--results", str(tmp_path), timeout=600)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    limit, overload = _recommended((tmp_path / "latest").resolve())
    assert 64 * 2**20 <= limit <= 512 * 2**20 and overload.max_connections and overload.max_heap_bytes
    assert SIZED_FOR <= overload.max_connections < UNBOUNDED / 2, overload

    # 2. Envoy at that limit without the settings: the unbounded load gets it OOM-killed
    testbed = testbed_factory()
    testbed.scale_backend(1)
    testbed.start_envoy(0.5, limit, 1)
    envoy = testbed.containers["envoy-local"]
    assert envoy.process is not None
    master = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", LocustOptions(HOST, "/"), workers=1))
    master.hold_connections(UNBOUNDED, testbed.gateway_url, HOST, refresh_s=20, open_rate=OPEN_RATE)
    deadline = time.monotonic() + 90
    while envoy.process.alive():
        assert time.monotonic() < deadline, "Envoy survived the unbounded load without overload settings"
        time.sleep(0.25)
    assert envoy.process.popen.returncode == -9 and envoy.cgroup.oom_kills() >= 1  # the memory cgroup killed it
    with pytest.raises(PlatformError, match="envoy-local exited with code -9: OOM-killed at its memory limit"):
        testbed.check()  # the supervisor sees it die

    # 3. the same limit with the recommended settings, the same load: alive, the excess refused
    testbed.start_envoy(0.5, limit, 1, overload=overload)
    envoy = testbed.containers["envoy-local"]
    assert envoy.process is not None
    master.hold_connections(UNBOUNDED, testbed.gateway_url, HOST, refresh_s=20, open_rate=OPEN_RATE)
    held = _settle(master, envoy.process.alive)
    time.sleep(5)  # a while at the cap
    testbed.check()
    assert envoy.cgroup.oom_kills() == 0 and envoy.cgroup.memory_working_set_bytes() < limit
    held = master.connections()
    assert 0.9 * overload.max_connections <= held.held <= overload.max_connections, held
    assert held.failed + held.closed_by_peer >= UNBOUNDED - overload.max_connections - 100, held
    assert _stat(testbed, "downstream_global_cx_overflow") > 0  # Envoy's own count of refused connections

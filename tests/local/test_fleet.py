"""A fleet of Envoy pods on the local platform: each pod a process in a cgroup of its own with the configuration's
limit, all on the gateway's one port (SO_REUSEPORT), each scraped as its own pod and measured as its own in every
window, pods added and removed as a Deployment scales; nothing left once the sweep or the test bed stops.

The gate's test is a sweep as a user starts one, at low load, judged on what any machine shows; the nightly one
drives both pods to their quota and judges what they read there."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest
import requests

from runner.guards import GuardContext, check_step
from runner.locust import LocustOptions
from runner.measure import StepMeter
from runner.metrics import Metrics
from runner.model import LoadLevel
from runner.paths import PROJECT_ROOT
from runner.platforms.local.cgroups import cgroup_from_spec
from runner.platforms.local.envoy_fleet import envoy_pod
from runner.platforms.local.testbed import SELECTORS, LocalTestbed, LocustSetup
from support.processes import alive
from support.scenarios import fixed_schedule_scenario
from support.sweeps import assert_stopped_cleanly, latest_summary, start_sweep, wait_for_steps
from support.wait import until

LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"
LIMIT = 0.25
MEMORY = 256 * 2**20  # the local scenario's envoy.memory
# the nightly test's pods: 100m each, so that 2,400 RPS offered fill both on any VM of this kind however the kernel
# hashes the 40 connections (on the fastest VM seen, 2026-11-27, a 500m pod's knee was near 2,900 RPS, so a 100m
# pod fills at about 600: a pod fills with 25% of the connections, where two 250m pods missed their quota once)
QUOTA_LIMIT = 0.1
OVERLOAD = LoadLevel(users=40, user_rps=60)  # 2,400 RPS offered
WINDOW_S = 6
# far below two 250m pods' knee on any VM here; at 5 RPS a user, 40 to 80 keep-alive connections for the kernel to
# spread over the pods' sockets; more levels than the test waits for, so the sweep is still measuring when stopped
LIGHT_LEVELS = [200, 300, 400, 400, 400]
PODS = [envoy_pod(0), envoy_pod(1)]


def _listening_ports(pid: int) -> set[int]:
    return {c.laddr.port for c in psutil.net_connections("tcp4") if c.status == "LISTEN" and c.pid == pid}


@pytest.mark.slow
@pytest.mark.parallel_safe  # light load; it judges where processes, cgroups and requests went, not how fast
def test_a_two_pod_sweep_runs_each_pod_in_its_own_cgroup_on_one_port_records_both_and_leaves_nothing_on_sigterm(
    tmp_path: Path,
):
    sweep = start_sweep(tmp_path, fixed_schedule_scenario(tmp_path, [LIMIT], LIGHT_LEVELS, replicas=2))
    started = wait_for_steps(sweep, tmp_path, config=0, steps=2)
    # the exporter's registry: every container of the test bed with its cgroup, as the sweep made them
    registry = json.loads((tmp_path / "latest" / "testbed" / "exporter-containers.json").read_text())
    groups = {entry["pod"]: cgroup_from_spec(entry["cgroup"]) for entry in registry if entry["pod"] in PODS}
    assert sorted(groups) == PODS, registry
    pids = {pod: group.pids() for pod, group in groups.items()}
    for pod, group in groups.items():  # each pod a process in a cgroup of its own, with the configuration's limit
        assert group.cpu_quota() == (25000, 100000) and group.memory_limit_bytes() == MEMORY, pod
        assert len(pids[pod]) == 1, pids
    first, second = (_listening_ports(pids[pod][0]) for pod in PODS)
    assert first & second, (first, second)  # one listener port shared (SO_REUSEPORT); each its own admin port
    assert first != second
    sweep.send_signal(signal.SIGTERM)
    assert_stopped_cleanly(sweep, started, signal.SIGTERM)
    assert not alive([p for found in pids.values() for p in found])

    config = latest_summary(tmp_path)["configs"][0]
    assert config["envoy"]["replicas"] == 2 and len(config["steps"]) >= 2
    for step in config["steps"]:  # every window records both pods, each serving part of the load
        assert [p["pod"] for p in step["pods"]] == PODS, step["pods"]
        assert all(p["envoy_rps"] and p["envoy_rps"] > 0 for p in step["pods"]), step["pods"]


def _listening_pids(port: int) -> set[int]:
    return {c.pid for c in psutil.net_connections("tcp4") if c.status == "LISTEN" and c.laddr.port == port and c.pid}


def _targets_up(testbed: LocalTestbed) -> set[str]:
    """The Envoy pods Prometheus scrapes and finds up."""
    answer = requests.get(f"{testbed.prometheus_url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
    return {t["labels"]["pod"] for t in answer if t["labels"].get("job") == "envoy-stats" and t["health"] == "up"}


@pytest.mark.slow  # it drives both pods to their quota: with the tests that measure CPU, one at a time
@pytest.mark.nightly  # it judges what the pods read at their quota, which a busy machine moves
def test_a_two_pod_fleet_is_measured_pod_by_pod_each_held_to_its_own_limit_and_leaves_nothing(testbed_factory):
    testbed = testbed_factory()
    testbed.start_monitoring()
    testbed.scale_backend(1)
    testbed.start_envoy(QUOTA_LIMIT, MEMORY, 1, replicas=2)
    names = [envoy_pod(0), envoy_pod(1)]
    pods = [testbed.containers[name] for name in names]
    pids = [pod.process.pid for pod in pods]
    assert len(set(pids)) == 2
    for pod in pods:  # each pod a process in a cgroup of its own, with the configuration's quota
        assert pod.cgroup.cpu_quota() == (10000, 100000) and pod.cgroup.memory_limit_bytes() == MEMORY
        assert pod.process.pid in pod.cgroup.pids()
    assert set(pids) <= _listening_pids(testbed.ports.gateway)  # one port, both pods: the kernel spreads connections
    until(lambda: _targets_up(testbed), 30, "Prometheus to scrape both pods", ready=lambda up: up == set(names))

    options = LocustOptions("external.nginx", "/", user_rps=OVERLOAD.user_rps)
    locust = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", options, workers=2))
    metrics = Metrics(testbed.prometheus_url)
    meter = StepMeter(locust=locust, metrics=metrics, selectors=SELECTORS, envoy_cpu_limit_cores=QUOTA_LIMIT)
    throttled_before = [pod.cgroup.cpu_throttling()[1] for pod in pods]
    locust.swarm(OVERLOAD.users, 100, testbed.gateway_url, options)
    until(locust.stats, 30, "the users running", ready=lambda stats: stats["user_count"] == OVERLOAD.users)
    step = meter.measure(0, OVERLOAD, WINDOW_S)
    locust.stop()

    assert [p.pod for p in step.pods] == names, step.pods
    for pod in step.pods:  # each pod reached its own limit (CFS throttled it) and was held there, never over it
        # (not a share of the limit for each: the kernel hashes connections to the pods, and the pod with fewer of
        # them reads less: 79% of its limit in one run of make test-all, where its twin passed 80%)
        assert pod.throttled_share and pod.throttled_share > 0 and pod.cpu_utilization_max <= 1.03, pod
        assert pod.envoy_rps and pod.envoy_rps > 0.25 * step.envoy_rps, (pod, step.envoy_rps)  # both served
        assert pod.active_connections and pod.active_connections >= 1, pod
        assert pod.worker_threads == 1 and pod.hottest_worker_cores is not None, pod
        assert 0 < pod.hottest_worker_cores <= pod.cpu_cores * 1.05, pod  # the one worker, inside its pod's CPU
    assert all(pod.cgroup.cpu_throttling()[1] > before for pod, before in zip(pods, throttled_before, strict=True))
    # the window reads its busiest pod against that pod's limit; the fleet's CPU summed over one pod's limit (what a
    # window read before per-pod windows) would read about twice that, and call the limit not enforced
    assert step.cpu_utilization_mean == max(p.cpu_utilization_mean for p in step.pods) <= 1.03
    assert step.envoy_cpu_cores / QUOTA_LIMIT > 1.03  # the sum over one pod's limit: past what a quota lets one pod use
    findings = check_step(step, [], GuardContext(threshold=0.9, workers=2))
    assert "cpu-limit-not-enforced" not in {f.guard for f in findings}, findings

    # fewer pods, as a Deployment scales in: the first keeps running, the other goes with its cgroup
    testbed.start_envoy(QUOTA_LIMIT, MEMORY, 1, replicas=1)
    assert testbed.containers[envoy_pod(0)].process.pid == pids[0]
    assert envoy_pod(1) not in testbed.containers and not alive([pids[1]])
    assert not pods[1].cgroup.usage_folder.exists()
    until(lambda: _targets_up(testbed), 30, "Prometheus to drop the pod", ready=lambda up: up == {envoy_pod(0)})
    testbed.start_envoy(QUOTA_LIMIT, MEMORY, 1, replicas=3)  # and more: new pods with the same limits
    assert {n for n in testbed.containers if n.startswith("envoy-")} == {envoy_pod(i) for i in range(3)}
    assert all(testbed.containers[envoy_pod(i)].cgroup.cpu_quota() == (10000, 100000) for i in range(3))
    # the test bed factory stops it and finds no process and no cgroup left

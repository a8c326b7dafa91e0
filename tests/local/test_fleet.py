"""A fleet of Envoy pods on the local platform: each pod a process in a cgroup of its own with the configuration's
limit, all on the gateway's one port (SO_REUSEPORT), each scraped as its own pod and measured as its own in every
window, pods added and removed as a Deployment scales; nothing left once the test bed stops."""

from __future__ import annotations

import psutil
import pytest
import requests

from runner.guards import GuardContext, check_step
from runner.locust import LocustOptions
from runner.measure import StepMeter
from runner.metrics import Metrics
from runner.model import LoadLevel
from runner.paths import PROJECT_ROOT
from runner.platforms.local.envoy_fleet import envoy_pod
from runner.platforms.local.testbed import SELECTORS, LocalTestbed, LocustSetup
from support.processes import alive
from support.wait import until

pytestmark = pytest.mark.slow  # it drives both pods to their quota: with the tests that measure CPU, one at a time

LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"
LIMIT = 0.25
MEMORY = 256 * 2**20
OVERLOAD = LoadLevel(users=40, user_rps=60)  # 2,400 RPS offered: more than two 250m pods serve on any VM here
WINDOW_S = 6


def _listening_pids(port: int) -> set[int]:
    return {c.pid for c in psutil.net_connections("tcp4") if c.status == "LISTEN" and c.laddr.port == port and c.pid}


def _targets_up(testbed: LocalTestbed) -> set[str]:
    """The Envoy pods Prometheus scrapes and finds up."""
    answer = requests.get(f"{testbed.prometheus_url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
    return {t["labels"]["pod"] for t in answer if t["labels"].get("job") == "envoy-stats" and t["health"] == "up"}


def test_a_two_pod_fleet_is_measured_pod_by_pod_each_held_to_its_own_limit_and_leaves_nothing(testbed_factory):
    testbed = testbed_factory()
    testbed.start_monitoring()
    testbed.scale_backend(1)
    testbed.start_envoy(LIMIT, MEMORY, 1, replicas=2)
    names = [envoy_pod(0), envoy_pod(1)]
    pods = [testbed.containers[name] for name in names]
    pids = [pod.process.pid for pod in pods]
    assert len(set(pids)) == 2
    for pod in pods:  # each pod a process in a cgroup of its own, with the configuration's quota
        assert pod.cgroup.cpu_quota() == (25000, 100000) and pod.cgroup.memory_limit_bytes() == MEMORY
        assert pod.process.pid in pod.cgroup.pids()
    assert set(pids) <= _listening_pids(testbed.ports.gateway)  # one port, both pods: the kernel spreads connections
    until(lambda: _targets_up(testbed), 30, "Prometheus to scrape both pods", ready=lambda up: up == set(names))

    options = LocustOptions("external.nginx", "/", user_rps=OVERLOAD.user_rps)
    locust = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", options, workers=2))
    metrics = Metrics(testbed.prometheus_url)
    meter = StepMeter(locust=locust, metrics=metrics, selectors=SELECTORS, envoy_cpu_limit_cores=LIMIT)
    throttled_before = [pod.cgroup.cpu_throttling()[1] for pod in pods]
    locust.swarm(OVERLOAD.users, 100, testbed.gateway_url, options)
    until(locust.stats, 30, "the users running", ready=lambda stats: stats["user_count"] == OVERLOAD.users)
    step = meter.measure(0, OVERLOAD, WINDOW_S)
    locust.stop()

    assert [p.pod for p in step.pods] == names, step.pods
    for pod in step.pods:  # each pod at its own limit, and held there: throttled, never over it
        assert pod.cpu_utilization_mean >= 0.8 and pod.cpu_utilization_max <= 1.03, pod
        assert pod.throttled_share and pod.throttled_share > 0, pod
        assert pod.envoy_rps and pod.envoy_rps > 0.25 * step.envoy_rps, (pod, step.envoy_rps)  # both served
        assert pod.active_connections and pod.active_connections >= 1, pod
        assert pod.worker_threads == 1 and pod.hottest_worker_cores is not None, pod
        assert 0 < pod.hottest_worker_cores <= pod.cpu_cores * 1.05, pod  # the one worker, inside its pod's CPU
    assert all(pod.cgroup.cpu_throttling()[1] > before for pod, before in zip(pods, throttled_before, strict=True))
    # the window reads its busiest pod against that pod's limit; the fleet's CPU summed over one pod's limit (what a
    # window read before per-pod windows) would read about twice that, and call the limit not enforced
    assert step.cpu_utilization_mean == max(p.cpu_utilization_mean for p in step.pods)
    assert step.envoy_cpu_cores / LIMIT > 1.6
    findings = check_step(step, [], GuardContext(threshold=0.9, workers=2))
    assert "cpu-limit-not-enforced" not in {f.guard for f in findings}, findings

    # fewer pods, as a Deployment scales in: the first keeps running, the other goes with its cgroup
    testbed.start_envoy(LIMIT, MEMORY, 1, replicas=1)
    assert testbed.containers[envoy_pod(0)].process.pid == pids[0]
    assert envoy_pod(1) not in testbed.containers and not alive([pids[1]])
    assert not pods[1].cgroup.usage_folder.exists()
    until(lambda: _targets_up(testbed), 30, "Prometheus to drop the pod", ready=lambda up: up == {envoy_pod(0)})
    testbed.start_envoy(LIMIT, MEMORY, 1, replicas=3)  # and more: new pods with the same limits
    assert {n for n in testbed.containers if n.startswith("envoy-")} == {envoy_pod(i) for i in range(3)}
    assert all(testbed.containers[envoy_pod(i)].cgroup.cpu_quota() == (25000, 100000) for i in range(3))
    # the test bed factory stops it and finds no process and no cgroup left

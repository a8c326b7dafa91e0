"""The mission's distributed half on the one-machine cluster: a sweep with two Locust workers (pods) against nginx
at one and two replicas. The two workers' load adds up to the offered rate, each worker carries part of it, and
with two replicas each nginx pod serves its share (its CPU from cAdvisor through the cluster's Prometheus, over
the configuration's window). Needs root."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest

from runner.platforms.kubernetes.loadgen import LocustNames
from runner.results import load_summary
from support.cluster import PROMETHEUS, run_dir_of, scenario_file, sizer

# make test-all: how two workers and two replicas share a load, each share measured against a bound
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]
# One fixed rate far below a 500m Envoy's knee on any machine of this kind: the test checks how the load is spread,
# not where the knee is. Each check holds window by window; an 8 s window holds 4 of Prometheus' 2 s scrapes of the
# pods' CPU counters. Uniform arrivals: the window holds 2,400 requests, not a Poisson count whose 2% spread would
# put the 0.97 bound below within 1.5 standard deviations.
DISTRIBUTED = {"envoy.cpu": [0.5], "backend.replicas": [1, 2], "load.workers": 2, "load.rounds": 1,
               "load.search": "fixed", "load.rps": [300], "load.arrivals": "uniform", "load.step_seconds": 8,
               "load.warmup_seconds": 3, "load.settle_seconds": 2}  # fmt: skip
SHARE = 0.25  # each of two pods does at least this share of their work (an even split is 0.5)


def _cpu_by_pod(pod_prefix: str, start: float, end: float) -> dict[str, float]:
    """CPU seconds each pod used over [start, end] (cAdvisor, through Prometheus): its pod's cgroup (no container and
    no image label), not its container's. cAdvisor here sometimes never labels a container that has just started (make
    test-all, 2026-11-28: the second nginx replica served for 110 s with no series of its nginx container, while its
    pod's cgroup had one), and the pod's cgroup holds that container's CPU and the pause container's (a few ms)."""
    selector = f'namespace="gateway-loadtest",container="",image="",pod=~"{pod_prefix}.*"'
    query = f"sum by (pod) (increase(container_cpu_usage_seconds_total{{{selector}}}[{round(end - start)}s]))"
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": end})
    with urllib.request.urlopen(url, timeout=10) as answer:
        result = json.loads(answer.read())["data"]["result"]
    return {series["metric"]["pod"]: float(series["value"][1]) for series in result}


@pytest.mark.timeout(1800)
def test_two_workers_add_up_to_the_offered_rate_and_two_nginx_replicas_share_the_load(cluster, tmp_path):
    kubeconfig, _ = cluster
    run = sizer("--scenario", str(scenario_file(tmp_path, **DISTRIBUTED)), kubeconfig=kubeconfig,
                results=tmp_path / "results")  # fmt: skip
    _, stderr = run.communicate(timeout=1500)
    assert run.returncode == 0, stderr[-3000:]
    summary = load_summary(run_dir_of(tmp_path / "results"))
    assert sorted(c.backend.replicas for c in summary.configs) == [1, 2]
    workers = LocustNames(summary.run_id).worker
    for config in summary.configs:
        assert [s.target_rps for s in config.steps] == [300], config.reason
        for step in config.steps:
            assert step.target_rps is not None and step.rps >= 0.97 * step.target_rps, step  # both workers: all of it
            assert not step.guards, step.guards
        start = config.steps[0].started_at
        end = config.steps[-1].started_at + config.steps[-1].window_s
        by_worker = _cpu_by_pod(workers, start, end)
        assert len(by_worker) == 2, by_worker
        assert min(by_worker.values()) >= SHARE * sum(by_worker.values()), by_worker  # each carried part of it
        by_replica = _cpu_by_pod("nginx-", start, end)
        busy = {pod: cpu for pod, cpu in by_replica.items() if cpu > 0}
        assert len(busy) == config.backend.replicas, by_replica
        if config.backend.replicas == 2:
            assert min(busy.values()) >= SHARE * sum(busy.values()), busy  # every replica served its share
    print(f"\n{len(summary.configs)} configurations, 2 workers: {[len(c.steps) for c in summary.configs]} windows")

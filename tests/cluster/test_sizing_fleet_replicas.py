"""A sizing fleet of several replicas on the real one-machine cluster (issue 30), in both installs: the classic
install's clone (a Deployment) and the Gateway API's (the provisioner's Envoy for a Gateway of the run's own),
scaled from 1 to 2 pods at one CPU limit, each window read per pod against the pod's own limit, production's pods
and objects untouched, nothing of the run left afterwards."""

from __future__ import annotations

import time

import pytest

from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.sizing_copy import fleet_name
from runner.platforms.kubernetes.sizing_gateway import copy_name
from runner.results import load_summary
from support.cluster import ENVOY, run_dir_of, scenario_file, sizer
from support.production import ProductionWatch, left_behind, production_objects

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]
LIMIT = 0.15
# Two rates below a 150m pod's knee on this cluster, one round, uniform arrivals: each window served in full, so
# every pod's CPU stays within its limit (8 s windows hold 4 of Prometheus' 2 s scrapes). Each user is one keep-alive
# connection, which the Service's kube-proxy sends to a pod at random: at 5 RPS a user, 12 and 24 connections, so a
# pod left without any has odds of 2 in 4096 (gateway-api.yaml's 20 RPS a user gave 2 users at 40 RPS, both on one
# pod in a run at 11:41)
FIXED = {
    "envoy.cpu": [LIMIT],
    "envoy.replicas": [1, 2],
    "load.rounds": 1,
    "load.search": "fixed",
    "load.rps": [60, 120],
    "load.max_rps_per_user": 5,
    "load.arrivals": "uniform",
    "load.step_seconds": 8,
    "load.warmup_seconds": 3,
    "load.settle_seconds": 1,
}
GATEWAY_ENVOY = workloads.Workload("Deployment", "projectcontour", "envoy-gateway-sizer", "envoy")  # production's
# install -> (scenario, production's Envoy, production's Gateway, the fleet's pod name prefix for a run id)
INSTALLS = {
    "classic": ("local.yaml", ENVOY, None, fleet_name),
    "gateway-api": ("gateway-api.yaml", GATEWAY_ENVOY, "gateway-sizer", lambda run: f"envoy-{copy_name(run)}-"),
}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("install", sorted(INSTALLS))
def test_a_sizing_fleet_of_two_replicas_is_read_per_pod_each_within_its_own_limit(
    cluster, runner_kubeconfig, tmp_path, install
):
    _, admin = cluster
    base, envoy, gateway, prefix = INSTALLS[install]
    before = production_objects(admin, envoy, gateway=gateway)
    watch = ProductionWatch(admin, envoy)
    started = time.monotonic()
    scenario = scenario_file(tmp_path, base, **FIXED)
    sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
    try:
        out, err = sweep.communicate(timeout=1100)
    finally:
        if sweep.poll() is None:
            sweep.terminate()
            sweep.communicate(timeout=600)
        changed = watch.stop()
    assert sweep.returncode == 0, err[-3000:]
    run_dir = run_dir_of(tmp_path)
    summary = load_summary(run_dir)
    fleet = prefix(run_dir.name)
    by_replicas = {c.envoy.replicas: c for c in summary.configs}
    assert sorted(by_replicas) == [1, 2], [c.envoy for c in summary.configs]
    figures = []
    for replicas, config in sorted(by_replicas.items()):
        assert config.steps, (config.status, config.reason)
        for step in config.steps:
            pods = step.pods
            assert len(pods) == replicas and len({p.pod for p in pods}) == replicas, (replicas, step.index, pods)
            assert all(p.pod.startswith(fleet) for p in pods), (fleet, [p.pod for p in pods])  # never production's
            for pod in pods:
                assert pod.envoy_rps is not None and pod.envoy_rps > 0, (replicas, step.index, pod)
                assert pod.cpu_utilization_max <= 1.05, (replicas, step.index, pod)  # the kubelet's quota holds
            # the fleet's pods together counted what Locust sent: no pod missing, none of production's in it
            counted = sum(p.envoy_rps or 0.0 for p in pods)
            assert abs(counted - step.rps) <= max(5.0, 0.1 * step.rps), (replicas, step.index, counted, step.rps)
            assert step.cpu_utilization_mean == max(p.cpu_utilization_mean for p in pods)  # the busiest pod's
            each = [(p.pod[-5:], round(p.envoy_rps or 0.0), round(p.cpu_utilization_max, 2)) for p in pods]
            figures.append((replicas, step.index, round(step.rps), each))
    print(f"{time.monotonic() - started:.0f} s; (replicas, window, RPS, [(pod, Envoy RPS, max utilization)]):")
    print("\n".join(str(f) for f in figures))
    assert production_objects(admin, envoy, gateway=gateway) == before
    assert changed == [], f"production's pods changed: {changed[:3]}"
    assert left_behind(admin) == []
    assert "preflight: the run creates a sizing fleet" in out, out[-2000:]

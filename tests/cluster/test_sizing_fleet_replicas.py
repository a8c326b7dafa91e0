"""A sizing fleet of several replicas on the real one-machine cluster (issue 30), in both installs: the classic
install's clone (a Deployment) and the Gateway API's (the provisioner's Envoy for a Gateway of the run's own, its
replicas the copied ContourDeployment's), scaled from 1 to 2 pods at one CPU limit beside production's Envoy, which
serves a steady load of its own meanwhile (the Gateway API install's through a route of its own the test adds);
each window read per pod against the pod's own limit, production's pods and objects untouched, nothing of the run
left afterwards."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from runner.platforms.kubernetes.sizing_copy import fleet_name
from runner.platforms.kubernetes.sizing_gateway import copy_name
from runner.platforms.kubernetes.workloads import Workload
from runner.results import load_summary
from support.cluster import ENVOY, run_dir_of, scenario_file, sizer
from support.production import ProductionWatch, SteadyLoad, left_behind, production_objects, production_route

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]
LIMIT = 0.15
# One rate below a 150m pod's knee on this cluster, one round, uniform arrivals: each window served in full, so
# every pod's CPU stays within its limit (8 s windows hold 4 of Prometheus' 2 s scrapes). Each user is one keep-alive
# connection, which the Service's kube-proxy sends to a pod at random: at 5 RPS a user, 24 connections, so a pod left
# without any has odds of 2 in 16.8 million (gateway-api.yaml's 20 RPS a user gave 2 users at 40 RPS, both on one pod
# in a run at 11:41). Every check holds window by window: one window per replica count checks each (a second rate,
# 60 RPS, added two windows a run and no check)
FIXED = {
    "envoy.cpu": [LIMIT],
    "envoy.replicas": [1, 2],
    "load.rounds": 1,
    "load.search": "fixed",
    "load.rps": [120],
    "load.max_rps_per_user": 5,
    "load.arrivals": "uniform",
    "load.step_seconds": 8,
    "load.warmup_seconds": 3,
    "load.settle_seconds": 1,
}
PRODUCTION_RPS = 10.0  # production's own steady load, which no window of the fleet's may count


@dataclass(frozen=True)
class Install:
    """One install on the cluster: the scenario that sizes it, production's Envoy and Gateway, the prefix of the
    fleet's pod names for a run id, and what the preflight says of the fleet."""

    scenario: str
    envoy: Workload
    service: str  # production's Envoy Service, the steady load's address
    gateway: str | None
    fleet_prefix: Callable[[str], str]
    preflight: str


INSTALLS = {
    "classic": Install("local.yaml", ENVOY, "envoy", None, fleet_name, "preflight: the run creates a sizing fleet"),
    "gateway-api": Install(
        "gateway-api.yaml",
        Workload("Deployment", "projectcontour", "envoy-gateway-sizer", "envoy"),
        "envoy-gateway-sizer",
        "gateway-sizer",
        lambda run_id: f"envoy-{copy_name(run_id)}-",
        "preflight: the run creates a sizing fleet (a Gateway of the run's own",
    ),
}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(INSTALLS))
def test_a_sizing_fleet_of_two_replicas_is_read_per_pod_each_within_its_own_limit(
    cluster, runner_kubeconfig, tmp_path, name
):
    _, admin = cluster
    install = INSTALLS[name]
    address = admin.core.read_namespaced_service(install.service, install.envoy.namespace).spec.cluster_ip
    # the Gateway API install's Gateway carries no route at rest: production's load needs one of its own
    with production_route(admin, address) if install.gateway else contextlib.nullcontext():
        before = production_objects(admin, install.envoy, gateway=install.gateway)
        watch, load = ProductionWatch(admin, install.envoy), SteadyLoad(address, PRODUCTION_RPS)
        started = time.monotonic()
        scenario = scenario_file(tmp_path, install.scenario, **FIXED)
        sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
        try:
            out, err = sweep.communicate(timeout=1100)
        finally:
            if sweep.poll() is None:
                sweep.terminate()
                sweep.communicate(timeout=600)
            load.stop()
            changed = watch.stop()
        assert sweep.returncode == 0, err[-3000:]
        assert production_objects(admin, install.envoy, gateway=install.gateway) == before
    run_dir = run_dir_of(tmp_path)
    summary = load_summary(run_dir)
    fleet = install.fleet_prefix(run_dir.name)
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
    print(f"{name}, {time.monotonic() - started:.0f} s; (replicas, window, RPS, [(pod, Envoy RPS, max utilization)]):")
    print("\n".join(str(f) for f in figures))
    assert load.answered >= 0.8 * load.sent > 0, (load.sent, load.answered)
    assert changed == [], f"production's pods changed: {changed[:3]}"
    assert left_behind(admin) == []
    assert install.preflight in out, out[-2000:]

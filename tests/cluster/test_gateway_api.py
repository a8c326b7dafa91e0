"""A Gateway API install on the real one-machine cluster: the Gateway projectcontour/gateway-sizer, whose Contour
and Envoy Contour's gateway provisioner made (make cluster-up installs it), swept as the runner's own
ServiceAccount with scenarios/gateway-api.yaml. The run sizes Envoy through the ContourDeployment, the
provisioner rolls it out, and it holds each limit in every window; at the end everything is as it was.
Needs root."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from runner.figures import added_us_per_request
from runner.model import RunSummary
from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.gateway_object import APPLIED
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector
from runner.platforms.kubernetes.provisioned import PARAMETERS, same_resources
from runner.platforms.kubernetes.resize import live_pods, running_resources
from runner.quantities import parse_cpu
from runner.results import load_summary
from support.cluster import TLS_FIXED, run_dir_of, sizer, wait_for_state
from support.selection import nightly_selected

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ENVOY = workloads.Workload("Deployment", "projectcontour", "envoy-gateway-sizer", "envoy")
SAMPLE_S = 0.5


def _scenario(folder: Path, **changes: Any) -> Path:
    """scenarios/gateway-api.yaml with short windows and `changes` (`section.key`, or a top-level key)."""
    data = yaml.safe_load((PROJECT_ROOT / "scenarios" / "gateway-api.yaml").read_text())
    data["load"].update({"step_seconds": 6, "warmup_seconds": 3, "settle_seconds": 1, "max_steps": 6})
    for key, value in changes.items():
        *section, name = key.split(".")
        (data[section[0]] if section else data)[name] = value
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _parameters(admin: Cluster) -> dict[str, Any]:
    group, version, plural = PARAMETERS
    found: Any = admin.custom.get_namespaced_custom_object(group, version, "projectcontour", plural, "gateway-sizer")
    return dict(found["spec"])


def _gateway(admin: Cluster) -> dict[str, Any]:
    gateway: Any = admin.custom.get_namespaced_custom_object("gateway.networking.k8s.io", "v1", "projectcontour",
                                                             "gateways", "gateway-sizer")  # fmt: skip
    return dict(gateway)


def _gateway_annotations(admin: Cluster) -> dict[str, str]:
    return dict(_gateway(admin)["metadata"].get("annotations") or {})


class LimitSampler:
    """The CPU limit every pod of the provisioned Envoy runs with, as its kubelet reports it (terminating pods too:
    a Deployment's old pod serves its connections while it drains), sampled every SAMPLE_S in a thread:
    (time, {pod: cores or None})."""

    def __init__(self, admin: Cluster) -> None:
        self.admin = admin
        self.samples: list[tuple[float, dict[str, float | None]]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            taken = time.time()
            limits: dict[str, float | None] = {}
            selector = workloads.pod_selector(workloads.read(self.admin, ENVOY))
            for pod in self.admin.core.list_namespaced_pod(ENVOY.namespace, label_selector=selector).items:
                cpu = ((running_resources(self.admin, pod, "envoy") or {}).get("limits") or {}).get("cpu")
                limits[pod.metadata.name] = parse_cpu(cpu) if cpu else None
            self.samples.append((taken, limits))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)

    def during(self, start: float, end: float) -> list[dict[str, float | None]]:
        return [limits for taken, limits in self.samples if start <= taken <= end]


def _left_behind(admin: Cluster) -> list[str]:
    """Objects of a run still in the cluster: HTTPRoutes, Locust's Deployments, the Lease."""
    selector = label_selector(MANAGED_BY)
    routes: Any = admin.custom.list_namespaced_custom_object("gateway.networking.k8s.io", "v1", "gateway-loadtest",
                                                        "httproutes", label_selector=selector)["items"]  # fmt: skip
    left = [f"HTTPRoute {r['metadata']['name']}" for r in routes]
    left += [f"Deployment {d.metadata.name}" for d in
             admin.apps.list_namespaced_deployment("gateway-loadtest", label_selector=selector).items]  # fmt: skip
    leases = client.CoordinationV1Api(admin.api).list_namespaced_lease("gateway-loadtest").items
    return left + [f"Lease {lease.metadata.name}" for lease in leases]


def _as_before(admin: Cluster, parameters: dict[str, Any], template: dict[str, Any]) -> None:
    assert _parameters(admin) == parameters
    assert [listener["name"] for listener in _gateway(admin)["spec"]["listeners"]] == ["http"]
    for namespace in ("projectcontour", "gateway-loadtest"):  # the TLS listeners' certificates: the run's namespace
        secrets = admin.core.list_namespaced_secret(namespace, label_selector=label_selector(MANAGED_BY)).items
        assert [secret.metadata.name for secret in secrets] == [], namespace
    assert workloads.get_pod_resources(admin, ENVOY) == template
    annotations = _gateway_annotations(admin)
    assert workloads.CHANGED_BY not in annotations and APPLIED not in annotations, annotations
    for pod in live_pods(admin, ENVOY):  # the provisioner rolled Envoy back out with its own resources
        assert same_resources(running_resources(admin, pod, "envoy"), template["envoy"]), pod.metadata.name
    assert _left_behind(admin) == []


@dataclass(frozen=True)
class GatewayRun:
    """A Gateway API sweep at 150m and 300m in two rounds, with the CPU limit each Envoy pod ran with sampled
    throughout, and the gateway's ContourDeployment and template from before it."""

    summary: RunSummary
    run_dir: Path
    sampler: LimitSampler
    adaptive: bool  # the default search (make test-all) or a fixed schedule (the gate)


@pytest.fixture(scope="module")
def gateway_run(request, cluster, runner_kubeconfig, tmp_path_factory) -> GatewayRun:
    """The gate's tests check how the run sizes Envoy and puts it back: one fixed rate per configuration and round
    will do. The nightly test checks its knees: the default search then, one window per configuration after round
    1's (each round costs a provisioner rollout per configuration)."""
    _, admin = cluster
    tmp_path = tmp_path_factory.mktemp("gateway")
    adaptive = nightly_selected(request)
    schedule = {"load.windows_per_round": 1} if adaptive else {"load.search": "fixed", "load.rps": [100]}
    scenario = _scenario(tmp_path, **{"envoy.cpu": [0.15, 0.3], "load.rounds": 2, **schedule})
    parameters, template = _parameters(admin), workloads.get_pod_resources(admin, ENVOY)
    sampler = LimitSampler(admin)
    try:
        sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
        _, err = sweep.communicate(timeout=2000)
    finally:
        sampler.stop()
    assert sweep.returncode == 0, err[-3000:]
    _as_before(admin, parameters, template)
    run_dir = run_dir_of(tmp_path)
    return GatewayRun(load_summary(run_dir), run_dir, sampler, adaptive)


@pytest.mark.timeout(2400)
def test_a_gateway_api_sweep_sizes_envoy_through_its_contourdeployment_and_puts_it_back(gateway_run):
    summary = gateway_run.summary
    assert summary.status == "complete", summary.reason
    assert "gateway provisioner" in (summary.limit_changes or ""), summary.limit_changes  # rounds cost rollouts
    windows = 0
    for config in summary.configs:
        assert config.envoy.concurrency == 0  # Envoy's own worker count
        assert {s.round for s in config.steps} == {1, 2}
        for step in config.steps:  # every pod, through every window, ran with the configuration's CPU limit
            seen = gateway_run.sampler.during(step.started_at, step.started_at + step.window_s)
            assert seen and all(set(pods.values()) == {config.envoy.cpu_cores} for pods in seen), (step.index, seen)
            windows += 1
    assert windows >= 4  # each configuration measured in both rounds
    report = (gateway_run.run_dir / "report.md").read_text()
    assert "| default |" in report  # the concurrency column says Envoy ran with its own default
    # the ContourDeployment, the Gateway's listeners and annotations, Envoy's pods: as before (checked by the fixture)


@pytest.mark.nightly  # where the knees fell, and that they bracket: a machine whose speed moves between rounds moves it
@pytest.mark.timeout(2400)
def test_a_gateway_api_sweep_finds_a_knee_per_limit_and_twice_the_cpu_serves_more(gateway_run):
    summary = gateway_run.summary
    assert gateway_run.adaptive
    for config in summary.configs:
        assert config.status == "saturated", (config.reason, config.search)
        assert config.knee is not None
    assert sum(len(c.steps) for c in summary.configs) >= 6  # round 1 brackets each knee, round 2 adds to each
    knees = [config.knee.rps for config in summary.configs if config.knee]
    assert knees[1] > knees[0], knees  # twice the CPU serves more


@pytest.mark.nightly  # the gate sends SIGTERM to a classic run (test_kubernetes_faults.py); this is its gateway twin
@pytest.mark.timeout(1200)
def test_sigterm_on_a_gateway_api_run_stops_the_load_and_puts_the_contourdeployment_back(
    cluster, runner_kubeconfig, tmp_path
):
    _, admin = cluster
    parameters, template = _parameters(admin), workloads.get_pod_resources(admin, ENVOY)
    scenario = _scenario(tmp_path, **{"envoy.cpu": [0.2], "load.step_seconds": 30, "load.rounds": 1})
    sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
    run_dir = run_dir_of(tmp_path)
    try:
        wait_for_state(admin, run_dir.name, lambda s: s.get("phase") == "measure" and (s.get("users") or 0) > 0,
                       timeout_s=900, what="a measuring window under load")  # fmt: skip
        assert _parameters(admin) != parameters  # sized through the ContourDeployment while it measures
        assert _gateway_annotations(admin)[workloads.CHANGED_BY] == run_dir.name
        sweep.send_signal(signal.SIGTERM)
        _, err = sweep.communicate(timeout=600)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.communicate()
    assert sweep.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "interrupted by SIGTERM" in err and "Traceback" not in err, err[-2000:]
    summary = load_summary(run_dir)
    assert summary.status == "interrupted" and "SIGTERM" in (summary.reason or "")
    _as_before(admin, parameters, template)


@pytest.mark.nightly  # a cost ratio, and 120 RPS sits near tls-new-connection's knee on a node 2x slower
@pytest.mark.timeout(1800)
def test_tls_profiles_on_a_gateway_api_install_are_served_by_https_listeners_the_run_adds_and_removes(
    cluster, runner_kubeconfig, tmp_path
):
    _, admin = cluster
    parameters, template = _parameters(admin), workloads.get_pod_resources(admin, ENVOY)
    # the TLS profiles' fixed schedule (support.cluster.TLS_FIXED): how the listener serves them, not their knees
    scenario = _scenario(tmp_path, profiles=["tls", "tls-new-connection"], **TLS_FIXED)
    sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
    _, err = sweep.communicate(timeout=1500)
    assert sweep.returncode == 0, err[-3000:]
    summary = load_summary(run_dir_of(tmp_path))
    configs = {config.profile.name: config for config in summary.configs}
    windows = {name: [(round(s.rps), round(s.envoy_rps), s.connections_per_request) for s in config.steps]
               for name, config in configs.items()}  # fmt: skip
    assert list(configs) == ["tls", "tls-new-connection"], windows
    for name, config in configs.items():
        # not-saturated: below the knee, as planned (saturated only where 120 RPS reach the threshold: a slow machine)
        assert config.status in ("not-saturated", "saturated"), (name, config.reason, windows[name])
        assert [s.target_rps for s in config.steps] == TLS_FIXED["load.rps"], (name, windows[name])
        assert not any(s.guards for s in config.steps), (name, [s.guards for s in config.steps])
        for step in config.steps:  # served in full
            assert step.target_rps is not None and step.fail_ratio == 0, (name, windows[name])
            assert step.envoy_rps >= 0.9 * step.target_rps, (name, windows[name])
        # Envoy counted the requests on the run's HTTPS listener (https-443): its RPS is the client's
        assert all(abs(s.envoy_rps - s.rps) <= 0.1 * s.rps for s in config.steps), (name, windows[name])
    # one new connection per request for tls-new-connection, none past the users' own for tls
    cx = {name: [s.connections_per_request for s in config.steps] for name, config in configs.items()}
    assert all(share is not None and 0.95 <= share <= 1.05 for share in cx["tls-new-connection"]), windows
    assert all(share is not None and share < 0.05 for share in cx["tls"]), windows
    # a handshake per request costs the most: at least twice the CPU a keep-alive request adds, both measured in
    # this run (see tests/cluster/test_kubernetes_sweep.py)
    cost = {name: added_us_per_request(config.steps) for name, config in configs.items()}
    assert cost["tls"] > 0 and cost["tls-new-connection"] >= 2.0 * cost["tls"], (cost, windows)
    _as_before(admin, parameters, template)

"""A Gateway API install on the real one-machine cluster: the Gateway projectcontour/gateway-sizer, whose Contour
and Envoy Contour's gateway provisioner made (make cluster-up installs it), swept as the runner's own
ServiceAccount with scenarios/gateway-api.yaml through a sizing fleet (the default): a GatewayClass, a copy of the
ContourDeployment and a Gateway of the run's own, for which the provisioner makes a Contour and an Envoy. The fleet
holds each limit in every window; production's Gateway, ContourDeployment, Envoy and pods are only read; at the
end, after a SIGTERM and after a SIGKILL and `restore`, nothing of the run is left. Needs root."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.figures import added_us_per_request
from runner.model import RunSummary
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector
from runner.platforms.kubernetes.resize import running_resources
from runner.platforms.kubernetes.sizing_gateway import copy_name
from runner.quantities import parse_cpu
from runner.results import load_summary
from support.cluster import TLS_FIXED, run_dir_of, scenario_file, sizer, stop_cleanly, wait_for_state
from support.processes import run_sizer
from support.production import ProductionWatch, SteadyLoad, left_behind, production_objects, production_route
from support.selection import nightly_selected

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ENVOY = workloads.Workload("Deployment", "projectcontour", "envoy-gateway-sizer", "envoy")  # production's
SAMPLE_S = 0.5
PRODUCTION_RPS = 20.0  # the steady load production's Envoy serves while the fleet is swept


def _fleet_envoy(run_id: str) -> workloads.Workload:
    """The Envoy the provisioner makes for the run's own Gateway."""
    return workloads.Workload("Deployment", "projectcontour", f"envoy-{copy_name(run_id)}", "envoy")


def _scenario(folder: Path, **changes: Any) -> Path:
    """scenarios/gateway-api.yaml with short windows and `changes` (`section.key`, or a top-level key)."""
    short = {"load.step_seconds": 6, "load.warmup_seconds": 3, "load.settle_seconds": 1, "load.max_steps": 6}
    return scenario_file(folder, "gateway-api.yaml", **{**short, **changes})  # `changes` may set the same keys


class LimitSampler:
    """The CPU limit every pod of the sizing fleet's Envoy runs with, as its kubelet reports it (terminating pods
    too: a Deployment's old pod serves its connections while it drains), sampled every SAMPLE_S in a thread once
    the run's directory names it: (time, {pod: cores or None})."""

    def __init__(self, admin: Cluster, results: Path) -> None:
        self.admin = admin
        self.results = results
        self.samples: list[tuple[float, dict[str, float | None]]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            taken = time.time()
            limits: dict[str, float | None] = {}
            latest = self.results / "latest"
            if not latest.exists():
                continue
            selector = f"app={_fleet_envoy(latest.resolve().name).name}"  # the provisioner's Envoy pod selector
            for pod in self.admin.core.list_namespaced_pod(ENVOY.namespace, label_selector=selector).items:
                cpu = ((running_resources(self.admin, pod, "envoy") or {}).get("limits") or {}).get("cpu")
                limits[pod.metadata.name] = parse_cpu(cpu) if cpu else None
            self.samples.append((taken, limits))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)

    def during(self, start: float, end: float) -> list[dict[str, float | None]]:
        return [limits for taken, limits in self.samples if start <= taken <= end]


def _as_before(admin: Cluster, before: dict[str, Any]) -> None:
    """Production as it was, byte for byte, its Envoy pods running its own resources; nothing of the run left."""
    assert production_objects(admin, ENVOY, gateway="gateway-sizer") == before
    for namespace in ("projectcontour", "gateway-loadtest"):  # the TLS listeners' certificates: the run's namespace
        secrets = admin.core.list_namespaced_secret(namespace, label_selector=label_selector(MANAGED_BY)).items
        assert [secret.metadata.name for secret in secrets] == [], namespace
    assert left_behind(admin) == []


@dataclass(frozen=True)
class GatewayRun:
    """A Gateway API sweep at 150m and 300m in two rounds through the run's own Gateway while a generator that is
    not the sweep's sends production's Envoy a steady load, with the CPU limit each of the fleet's Envoy pods ran
    with sampled throughout; production was checked as before by the fixture."""

    summary: RunSummary
    run_dir: Path
    out: str
    sampler: LimitSampler
    cores: int  # the node's, which Envoy's default worker count follows
    adaptive: bool  # the default search (make test-all) or a fixed schedule (the gate)


@pytest.fixture(scope="module")
def gateway_run(request, cluster, runner_kubeconfig, tmp_path_factory) -> GatewayRun:
    """The gate's tests check how the run sizes its fleet and leaves production alone: one fixed rate per
    configuration and round will do. The nightly test checks its knees: the default search then, one window per
    configuration after round 1's. Production byte for byte as before, its pods never restarted or resized
    (sampled every second), its own load served throughout; nothing of the run left afterwards."""
    _, admin = cluster
    tmp_path = tmp_path_factory.mktemp("gateway")
    adaptive = nightly_selected(request)
    schedule = {"load.windows_per_round": 1} if adaptive else {"load.search": "fixed", "load.rps": [100]}
    scenario = _scenario(tmp_path, **{"envoy.cpu": [0.15, 0.3], "load.rounds": 2, **schedule})
    address = admin.core.read_namespaced_service(ENVOY.name, "projectcontour").spec.cluster_ip
    with production_route(admin, address):
        before = production_objects(admin, ENVOY, gateway="gateway-sizer")  # with its route, served
        watch, load = ProductionWatch(admin, ENVOY), SteadyLoad(address, PRODUCTION_RPS)
        sampler = LimitSampler(admin, tmp_path)
        try:
            sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
            out, err = sweep.communicate(timeout=2000)
        finally:
            sampler.stop()
            load.stop()
            changed = watch.stop()
        assert sweep.returncode == 0, err[-3000:]
        _as_before(admin, before)  # while production's route is still there, as it was before the run
    assert load.answered >= 0.8 * load.sent > 0, (load.sent, load.answered)
    assert changed == [], f"production's pods changed: {changed[:3]} (first {watch.first})"
    run_dir = run_dir_of(tmp_path)
    cores = int(admin.core.read_node("gsz-node").status.capacity["cpu"])
    return GatewayRun(load_summary(run_dir), run_dir, out, sampler, cores, adaptive)


@pytest.mark.timeout(2400)
def test_a_gateway_api_sizing_fleet_holds_its_limits_beside_a_loaded_production_gateway_and_goes(gateway_run):
    """Issue 29's acceptance, Gateway API: every fleet pod at its configuration's limit in every window, resized in
    place between them, production's traffic in no window (Envoy's counter is the sweep's own load)."""
    summary = gateway_run.summary
    assert "preflight: the run creates a sizing fleet (a Gateway of the run's own" in gateway_run.out, gateway_run.out
    assert summary.status == "complete", summary.reason
    assert "resized in place" in (summary.limit_changes or ""), summary.limit_changes  # rounds cost no rollout
    windows = 0
    for config in summary.configs:
        # Envoy's own worker count (the provisioner sets its args), as Envoy reports it: one per CPU of the node, or
        # from Envoy 1.37 its CPU limit's cores (1 at 150m and 300m on the one-machine cluster)
        threads = config.envoy.threads
        assert config.envoy.concurrency == 0 and threads is not None and 1 <= threads <= gateway_run.cores, config.envoy
        assert {s.round for s in config.steps} == {1, 2}
        for step in config.steps:  # every pod, through every window, ran with the configuration's CPU limit
            seen = gateway_run.sampler.during(step.started_at, step.started_at + step.window_s)
            assert seen and all(set(pods.values()) == {config.envoy.cpu_cores} for pods in seen), (step.index, seen)
            assert not step.guards and abs(step.envoy_rps - step.rps) <= max(5.0, 0.1 * step.rps), step
            windows += 1
    assert windows >= 4  # each configuration measured in both rounds
    report = (gateway_run.run_dir / "report.md").read_text()
    # the concurrency column: Envoy's own default, and what it came to
    assert f"| default ({summary.configs[0].envoy.threads}) |" in report


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
def test_sigterm_on_a_gateway_api_run_stops_the_load_and_deletes_the_run_s_gateway_and_what_it_made(
    cluster, runner_kubeconfig, tmp_path
):
    _, admin = cluster
    before = production_objects(admin, ENVOY, gateway="gateway-sizer")
    scenario = _scenario(tmp_path, **{"envoy.cpu": [0.2], "load.step_seconds": 30, "load.rounds": 1})
    sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
    run_dir = run_dir_of(tmp_path)
    try:
        wait_for_state(admin, run_dir.name, lambda s: s.get("phase") == "measure" and (s.get("users") or 0) > 0,
                       timeout_s=900, what="a measuring window under load")  # fmt: skip
        assert workloads.replicas(admin, _fleet_envoy(run_dir.name)) == 1  # the provisioner made the run's Envoy
        assert production_objects(admin, ENVOY, gateway="gateway-sizer") == before
        sweep.send_signal(signal.SIGTERM)
        _, err = sweep.communicate(timeout=600)
    finally:
        stop_cleanly(sweep)  # an assertion failed before the signal
    assert sweep.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "interrupted by SIGTERM" in err and "Traceback" not in err, err[-2000:]
    summary = load_summary(run_dir)
    assert summary.status == "interrupted" and "SIGTERM" in (summary.reason or "")
    _as_before(admin, before)


@pytest.mark.nightly  # a provisioner's Gateway made and measured before the kill: minutes the gate's 6 do not hold
@pytest.mark.timeout(1200)
def test_restore_after_a_sigkill_deletes_the_run_s_gateway_class_parameters_and_what_the_provisioner_made(
    cluster, runner_kubeconfig, tmp_path
):
    _, admin = cluster
    before = production_objects(admin, ENVOY, gateway="gateway-sizer")
    scenario = _scenario(tmp_path, **{"envoy.cpu": [0.2], "load.step_seconds": 30, "load.rounds": 1})
    sweep = sizer("--scenario", str(scenario), kubeconfig=runner_kubeconfig, results=tmp_path)
    run_dir = run_dir_of(tmp_path)
    try:
        wait_for_state(
            admin,
            run_dir.name,
            lambda s: s.get("phase") == "measure" and (s.get("users") or 0) > 0,
            timeout_s=900,
            what="a measuring window under load",
        )
    finally:
        sweep.send_signal(signal.SIGKILL)  # no cleanup can run
        sweep.communicate()
    left = left_behind(admin)
    assert f"provisioned {_fleet_envoy(run_dir.name).name}" in left, left
    assert f"GatewayClass {copy_name(run_dir.name)}" in left, left
    result = run_sizer("restore", str(run_dir), timeout=600, env={"KUBECONFIG": str(runner_kubeconfig)})
    assert result.returncode == 0, result.stderr[-3000:]
    # the sweep ran as a process on this machine and is gone: its Lease (renewed <= 10 s before the kill, so not
    # expired yet) is taken over at once, not after up to 60 s
    ended = f"at once: its process {sweep.pid} on this machine has ended"
    assert f"took over run {run_dir.name}'s Lease " in result.stdout and ended in result.stdout, result.stdout
    assert f"deleted Gateway projectcontour/{copy_name(run_dir.name)}" in result.stdout, result.stdout
    _as_before(admin, before)


@pytest.mark.nightly  # a cost ratio, and 120 RPS sits near tls-new-connection's knee on a node 2x slower
@pytest.mark.timeout(1800)
def test_tls_profiles_on_a_gateway_api_install_are_served_by_https_listeners_the_run_adds_and_removes(
    cluster, runner_kubeconfig, tmp_path
):
    _, admin = cluster
    before = production_objects(admin, ENVOY, gateway="gateway-sizer")
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
    _as_before(admin, before)  # the listeners were the run's own Gateway's

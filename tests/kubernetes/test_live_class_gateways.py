"""A live run's blast radius on a Gateway API install, against a real API server: the ContourDeployment the run
sizes also sizes every Gateway of its class (and of any class naming it) created while the run has it changed.
A Gateway created between two configurations stops the run, which restores; `restore` updates every Gateway the
ContourDeployment sizes, so that the provisioner renders each one's Envoy again. No provisioner runs beside a lone
API server: support.gateway_api.StandInProvisioner renders a Gateway's Envoy from its class's ContourDeployment at
each update of the Gateway, as Contour's does (tests/cluster runs the real one). The sweep's load and measurements
are simulated (support.simulated); its configurations' changes are the kubernetes platform's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from runner.errors import PlatformError
from runner.model import ConfigResult
from runner.observer import SweepObserver
from runner.plan import Configuration, plan_sweep
from runner.platforms.kubernetes.connection import Cluster, connect
from runner.platforms.kubernetes.gateway_object import APPLIED
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.provisioned import PARAMETERS, same_resources
from runner.platforms.kubernetes.workloads import CHANGED_BY
from runner.results import RunStore, load_summary
from runner.scenario import Scenario, parse_scenario
from runner.sweep import Sweep
from support import k8s
from support.apiserver import ApiServer
from support.gateway_api import (
    ALL,
    StandInProvisioner,
    envoy_resources,
    gateway,
    gateway_class,
    listener,
    read,
)
from support.processes import run_sizer
from support.simulated import FakeClock, FakePlatform, SimulatedEnvoy
from support.wait import until

pytestmark = pytest.mark.kubernetes
ORIGINAL = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
LOAD = {"step_seconds": 8, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "seed": 1, "rounds": 1}
RENDERED_S = 30  # for the stand-in provisioner to render an Envoy


@pytest.fixture
def provisioner(apiserver: ApiServer, namespace: str) -> Iterator[StandInProvisioner]:
    stand_in = StandInProvisioner(connect(str(apiserver.kubeconfig)), namespace)
    yield stand_in
    stand_in.stop()


def _class_of_its_own(admin: Cluster, namespace: str, provisioner: StandInProvisioner) -> str:
    """A Contour GatewayClass whose ContourDeployment `params` gives Envoy ORIGINAL, its Gateway `gw` (its Envoy
    rendered by the provisioner) and the test bed's nginx; returns the class's name."""
    group, version, plural = PARAMETERS
    admin.custom.create_namespaced_custom_object(group, version, namespace, plural, {
        "apiVersion": f"{group}/{version}", "kind": "ContourDeployment", "metadata": {"name": "params"},
        "spec": {"envoy": {"workloadType": "Deployment", "resources": ORIGINAL}}})  # fmt: skip
    name = f"class-{namespace}"
    gateway_class(admin, name, {"group": group, "kind": "ContourDeployment", "namespace": namespace, "name": "params"})
    gateway(admin, namespace, "gw", name, [listener(allowedRoutes=ALL)])
    k8s.gateway(admin, namespace)  # nginx, the backend (and a DaemonSet envoy no one reads here)
    _rendered(admin, namespace, "gw", ORIGINAL, provisioner)
    return name


def _rendered(
    admin: Cluster, namespace: str, gateway_name: str, resources: dict[str, Any], provisioner: StandInProvisioner
) -> None:
    """Wait until the Envoy of the Gateway runs with `resources` in its template."""

    def envoy() -> dict[str, Any] | None:
        try:
            return envoy_resources(admin, namespace, gateway_name)
        except client.ApiException:
            return None

    until(envoy, RENDERED_S, f"envoy-{gateway_name} with {resources} ({provisioner.error})",
          ready=lambda found: found is not None and same_resources(found, resources))  # fmt: skip


def _scenario(apiserver: ApiServer, namespace: str, cpus: list[float]) -> Scenario:
    return parse_scenario(
        {
            "name": "live-gateway",
            "platform": "kubernetes",
            "envoy": {"cpu": cpus, "memory": ["256Mi"]},
            "backend": {"workload": {"namespace": namespace, "name": "nginx", "container": "nginx"}},
            "load": LOAD,
            "kubernetes": {
                "kubeconfig": str(apiserver.kubeconfig),
                "namespace": namespace,
                "target": "live",
                "rollout_timeout_seconds": RENDERED_S,
                "gateway": {"kind": "gateway", "namespace": namespace, "name": "gw"},
            },
        }
    )


def _sized(cpu: str) -> dict[str, Any]:
    return {"limits": {"cpu": cpu, "memory": "256Mi"}, "requests": {"cpu": cpu, "memory": "256Mi"}}


class LiveGatewaySimulatedLoad(FakePlatform):
    """The kubernetes platform's live run on a Gateway (its Lease and originals, each configuration's change of the
    ContourDeployment waited on until the provisioner has rendered it, everything undone at the end) under a
    simulated Envoy, load and Prometheus: nothing serves or measures beside a lone API server."""

    def __init__(self, kube: KubernetesPlatform, admin: Cluster) -> None:
        super().__init__(FakeClock(), self._envoy)
        self.kube, self.admin = kube, admin

    @staticmethod
    def _envoy(config: Configuration) -> SimulatedEnvoy:
        return SimulatedEnvoy(limit_cores=config.envoy_cpu_cores, seed=round(config.envoy_cpu_cores * 1000))

    def start(self) -> None:
        super().start()
        self.kube.cluster = self.admin
        self.kube.claim(self.admin)

    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        self.kube.check()
        self.kube.fleet.size(self.admin, config, fresh=fresh)
        super().apply(config, fresh=fresh)

    def stop(self) -> None:
        super().stop()
        self.kube.stop()


class GatewayCreatedAfterTheFirst(SweepObserver):
    """Creates Gateway `late` of the run's class once the first configuration is measured, and waits until the
    provisioner has rendered its Envoy (with the run's sizing: the ContourDeployment as the run changed it)."""

    def __init__(self, admin: Cluster, namespace: str, class_name: str, provisioner: StandInProvisioner) -> None:
        self.admin, self.namespace, self.class_name, self.provisioner = admin, namespace, class_name, provisioner
        self.measured: list[str] = []

    def config_finished(self, result: ConfigResult) -> None:
        self.measured.append(result.label)
        if len(self.measured) == 1:
            gateway(self.admin, self.namespace, "late", self.class_name, [listener()])
            _rendered(self.admin, self.namespace, "late", _sized("250m"), self.provisioner)


def test_a_gateway_of_the_class_created_between_two_configurations_stops_the_run_and_all_is_restored(
    apiserver, admin, namespace, provisioner, tmp_path: Path
):
    class_name = _class_of_its_own(admin, namespace, provisioner)
    parameters_before = read(admin, namespace, "contourdeployments", "params")["spec"]
    scenario = _scenario(apiserver, namespace, [0.25, 0.5, 0.75])
    store = RunStore.create(scenario, tmp_path)
    kube = KubernetesPlatform(scenario, store.run_dir, live=True)
    platform = LiveGatewaySimulatedLoad(kube, admin)
    observer = GatewayCreatedAfterTheFirst(admin, namespace, class_name, provisioner)
    sweep = Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, observer=observer,
                  clock=platform.clock)  # fmt: skip

    with pytest.raises(PlatformError) as stopped:
        sweep.run()
    line = stopped.value.one_line()
    assert line.startswith(
        f"Gateway(s) {namespace}/late (GatewayClass {class_name}) created during the run: Contour's provisioner "
        f"sizes their Envoy from ContourDeployment {namespace}/params, which the run has changed: "
    ), line
    assert "a GatewayClass and ContourDeployment of its own" in line and "\n" not in line
    # the run stopped there: the third configuration was never applied, the first's windows are kept
    summary = load_summary(store.run_dir)
    assert summary.status == "failed" and summary.reason == line
    first, second = summary.configs
    assert first.finished and first.steps and first.envoy.cpu_cores == 0.25
    assert second.status == "failed" and second.reason == line and not second.steps
    assert [c.envoy_cpu_cores for c in platform.applied] == [0.25] and platform.stopped == 1

    # everything restored: the ContourDeployment, the run's Gateway, and both Gateways' Envoys rendered again from it
    assert read(admin, namespace, "contourdeployments", "params")["spec"] == parameters_before
    annotations = read(admin, namespace, "gateways", "gw")["metadata"].get("annotations") or {}
    assert CHANGED_BY not in annotations and APPLIED not in annotations
    assert same_resources(envoy_resources(admin, namespace, "gw"), ORIGINAL)
    _rendered(admin, namespace, "late", ORIGINAL, provisioner)
    assert not ClusterChanges.load(store.run_dir).pending
    assert client.CoordinationV1Api(admin.api).list_namespaced_lease(namespace).items == []


def test_restore_after_a_live_run_nudges_every_gateway_the_contourdeployment_sizes(
    apiserver, admin, namespace, provisioner, tmp_path: Path
):
    class_name = _class_of_its_own(admin, namespace, provisioner)
    parameters_before = read(admin, namespace, "contourdeployments", "params")["spec"]
    scenario = _scenario(apiserver, namespace, [0.25])
    store = RunStore.create(scenario, tmp_path)
    kube = KubernetesPlatform(scenario, store.run_dir, live=True)
    kube.cluster = admin
    kube.claim(admin)
    kube.fleet.size(admin, plan_sweep(scenario).configurations[0], fresh=False)
    _rendered(admin, namespace, "gw", _sized("250m"), provisioner)
    assert kube.lease is not None
    kube.lease.release()  # the run is gone without undoing anything (killed; its Lease expired)

    # meanwhile a second Gateway of the run's class, and a class of someone else's naming the same ContourDeployment
    # with a Gateway of its own: the provisioner gives both Envoys the run's sizing
    gateway(admin, namespace, "late", class_name, [listener()])
    params = {"group": PARAMETERS[0], "kind": "ContourDeployment", "namespace": namespace, "name": "params"}
    gateway_class(admin, f"other-{namespace}", params)
    gateway(admin, namespace, "beside", f"other-{namespace}", [listener()])
    for name in ("late", "beside"):
        _rendered(admin, namespace, name, _sized("250m"), provisioner)

    result = run_sizer("restore", str(store.run_dir))
    assert result.returncode == 0, result.stderr
    assert read(admin, namespace, "contourdeployments", "params")["spec"] == parameters_before
    for name in ("gw", "late", "beside"):  # each Envoy rendered again from the ContourDeployment as restored
        _rendered(admin, namespace, name, ORIGINAL, provisioner)
    assert (
        f"nudged Gateway(s) {namespace}/beside, {namespace}/gw, {namespace}/late: the provisioner renders their "
        f"Envoy again from ContourDeployment {namespace}/params"
    ) in result.stdout, result.stdout

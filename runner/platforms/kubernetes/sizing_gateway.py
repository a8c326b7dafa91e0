"""The Gateway API install's sizing fleet: a GatewayClass, a ContourDeployment copied from the user's and a Gateway,
all of the run's own, for which Contour's gateway provisioner makes a Contour and an Envoy Deployment; the run's
HTTPRoute sends the load's Host header to the backend through that Gateway.

The copy keeps the user's ContourDeployment (Envoy's log level, overload settings, extra volumes, pod annotations,
tolerations, Contour's own settings) but for what makes it the run's and cheap: Envoy a Deployment of the run's
replicas with the configuration's resources, placed with the scenario's node selector or on the node of the
production Gateway's first Envoy pod; a ClusterIP Service (never a LoadBalancer); one Contour replica; and an
ingress class of its own, so its Contour takes no HTTPProxy of anyone (two Contours writing one HTTPProxy's
status fight over it). The Gateway listens for HTTP on the port of the user's first HTTP listener, routes from
every namespace.

Between configurations that change only CPU and memory the Envoy pods are resized in place (pods/resize: the
provisioner writes the Deployment's template, not its pods); a change of replicas goes into the ContourDeployment
and the provisioner rolls Envoy out. On every exit and by `restore` the Gateway goes first, and the run waits for
the provisioner to delete what it made for it before the class and the ContourDeployment go
(provisioned.wait_unprovisioned: it deletes them only while the class exists); the Lease of its Contour, which the
provisioner leaves, goes once that Contour's pods are gone (contour_lease.py).
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any

from runner.errors import PlatformError, SizerError, UsageError
from runner.locust import LocustMaster
from runner.plan import Configuration
from runner.platforms.kubernetes import contour_lease, provisioned, workloads
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.created import RunObjects
from runner.platforms.kubernetes.fleet import EnvoyFleet, TlsObjects
from runner.platforms.kubernetes.fleet_objects import first_configuration, remove_leftovers, view_of
from runner.platforms.kubernetes.gateway_object import (
    APPLIED,
    add_annotation,
    gateway_annotations,
    json_patch,
    patch_gateway,
)
from runner.platforms.kubernetes.httproute import route_to_backend
from runner.platforms.kubernetes.listener_tls import ListenerTls
from runner.platforms.kubernetes.objects import RUN_LABEL, gateway_key, label_value, run_hash, run_labels
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.resize import ResizeUnsupported, live_pods
from runner.platforms.kubernetes.template_sizing import TemplateSizing
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import Scenario
from runner.scenario.gateway import GatewayRef

COMPONENT = "gateway-sizer-gateway"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def copy_name(run_id: str) -> str:
    """The name the run's GatewayClass, ContourDeployment and Gateway share."""
    return f"gateway-sizer-{run_hash(run_id)}"


def copied_parameters(
    user: dict[str, Any],
    name: str,
    resources: dict[str, Any],
    replicas: int,
    node_selector: dict[str, str],
    run_id: str,
) -> dict[str, Any]:
    """The run's ContourDeployment spec from the user's (see the module's docstring for what differs)."""
    spec = copy.deepcopy(user.get("spec") or {})
    envoy = spec.setdefault("envoy", {})
    for dropped in ("daemonSet", "replicas"):
        envoy.pop(dropped, None)
    envoy["workloadType"] = "Deployment"
    envoy["deployment"] = {**(envoy.get("deployment") or {}), "replicas": replicas}
    envoy["resources"] = resources
    envoy["networkPublishing"] = {"type": "ClusterIPService"}
    tolerations = (envoy.get("nodePlacement") or {}).get("tolerations")
    envoy["nodePlacement"] = {
        "nodeSelector": dict(node_selector),
        **({"tolerations": tolerations} if tolerations else {}),
    }
    contour = spec.setdefault("contour", {})
    contour.pop("replicas", None)
    contour["deployment"] = {**(contour.get("deployment") or {}), "replicas": 1}
    runtime = spec.setdefault("runtimeSettings", {})
    runtime["ingress"] = {**(runtime.get("ingress") or {}), "classNames": [name]}
    spec["resourceLabels"] = {**(spec.get("resourceLabels") or {}), RUN_LABEL: label_value(run_id)}
    return spec


def http_port(gateway: dict[str, Any]) -> int:
    """The port of the user's Gateway's first HTTP listener (80 when it has none)."""
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    return next((int(item["port"]) for item in listeners if item.get("protocol") == "HTTP"), 80)


class ProvisionedSizing(EnvoyFleet):
    """A Gateway of the run's own beside the production Gateway, provisioned by the same provisioner."""

    shape = "a sizing fleet (a Gateway of the run's own, made by Contour's gateway provisioner)"
    sizing = True

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        super().__init__(scenario, run_id, changes)
        envoy = scenario.envoy.workload
        self.name = copy_name(run_id)
        self.gateway = gateway_key(envoy.namespace, envoy.name)
        self.labels = run_labels(COMPONENT, run_id, self.gateway)
        self.objects = RunObjects(changes)
        self.found: provisioned.GatewayClassOf | None = None
        self.user_parameters: dict[str, Any] = {}
        self.port = 80
        self.node: str | None = None
        self.parameters: provisioned.Parameters | None = None

    @property
    def namespace(self) -> str:
        return self.scenario.kubernetes.gateway.namespace

    @property
    def workload(self) -> Workload:
        return Workload("Deployment", self.namespace, f"envoy-{self.name}", "envoy")

    @property
    def view(self) -> Scenario:
        ref = self.scenario.kubernetes.gateway
        gateway = GatewayRef(
            kind="gateway", namespace=ref.namespace, name=self.name, controller_name=ref.controller_name
        )
        port = "" if self.port == 80 else f":{self.port}"
        url = f"http://{self.workload.name}.{self.namespace}.svc.cluster.local{port}"
        contour = Workload("Deployment", self.namespace, f"contour-{self.name}", "contour")
        return view_of(self.scenario, self.workload, url, gateway, contour)

    @property
    def guaranteed(self) -> bool:
        return False  # the provisioner sizes the sidecar and the init container: Burstable pods

    def pod_labels(self) -> tuple[str, dict[str, str]]:
        return self.namespace, {"app": self.workload.name}  # the provisioner's Envoy pod selector

    def find(self, cluster: Cluster) -> None:
        self.found = found = provisioned.class_of(cluster, self.scenario)
        ref = self.scenario.kubernetes.gateway
        gateway = provisioned.gateway_api(cluster, f"read {found.gateway}", "gateways", ref.namespace, ref.name)
        self.port = http_port(gateway)
        group, version, plural = provisioned.PARAMETERS
        found_parameters: Any = call(
            f"read {provisioned.PARAMETERS_KIND} {found.parameters_namespace}/{found.parameters_name}",
            cluster.custom.get_namespaced_custom_object,
            group,
            version,
            found.parameters_namespace,
            plural,
            found.parameters_name,
        )
        self.user_parameters = dict(found_parameters)
        self.production = production = provisioned.provisioned_envoy(cluster, self.scenario, found.gateway)
        pods = sorted(live_pods(cluster, production), key=lambda p: p.metadata.name)
        self.node = next((p.spec.node_name for p in pods if p.spec.node_name), None)
        if self.scenario.kubernetes.sizing.node_selector is None and self.node is None:
            raise UsageError(
                f"{production} runs no pod on a node, so the sizing fleet has no node to copy",
                "name the node it should run on (kubernetes.sizing.node_selector)",
            )

    def _sized(self, config: Configuration) -> dict[str, Any]:
        return workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=True)

    def claim(self, cluster: Cluster) -> None:
        """Delete a killed run's copy, then create the ContourDeployment, the GatewayClass and the Gateway, recorded
        first in the order undo deletes them (the Gateway, its Contour's Lease, then what its provisioner needed)."""
        found = self.found
        assert found is not None, "found first"
        params_ns = found.parameters_namespace
        for kind, namespace in (("Gateway", self.namespace), ("ContourDeployment", params_ns), ("GatewayClass", "")):
            gone = remove_leftovers(
                cluster, self.objects, namespace, self.gateway, COMPONENT, keep=self.name, kinds=(kind,)
            )
            if kind != "Gateway":
                continue
            for leftover in gone:  # "Gateway <name>": its Contour's Lease goes too, unless that Contour still runs
                lease = contour_lease.lease_name(leftover.removeprefix("Gateway "))
                with contextlib.suppress(SizerError):  # a leftover's Lease never stops this run
                    self.objects.delete(cluster, contour_lease.KIND, namespace, lease)
        first = first_configuration(self.scenario)
        placement = self.scenario.kubernetes.sizing.node_selector or {HOSTNAME_LABEL: str(self.node)}
        spec = copied_parameters(
            self.user_parameters, self.name, self._sized(first), first.envoy_replicas, placement, self.run_id
        )
        group, version, _ = provisioned.PARAMETERS
        bodies: list[dict[str, Any]] = [
            {
                "apiVersion": f"{group}/{version}",
                "kind": provisioned.PARAMETERS_KIND,
                "metadata": {"name": self.name, "namespace": params_ns, "labels": self.labels},
                "spec": spec,
            },
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": self.name, "labels": self.labels},
                "spec": {
                    "controllerName": found.controller,
                    "parametersRef": {
                        "group": group,
                        "kind": provisioned.PARAMETERS_KIND,
                        "name": self.name,
                        "namespace": params_ns,
                    },
                },
            },
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
                "spec": {
                    "gatewayClassName": self.name,
                    "listeners": [
                        {
                            "name": "http",
                            "protocol": "HTTP",
                            "port": self.port,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            },
        ]
        for body in reversed(bodies):  # recorded Gateway first: undo deletes in the recorded order
            self.objects.record(body["kind"], body["metadata"].get("namespace", ""), [self.name])
            if body["kind"] == "Gateway":  # its Contour's Lease, deleted once the provisioner has removed that Contour
                self.objects.record(contour_lease.KIND, self.namespace, [contour_lease.lease_name(self.name)])
        for body in bodies:
            self.objects.create_custom(cluster, body)
        parameters = provisioned.Parameters(
            params_ns, self.name, self.namespace, self.name, self.workload, envoy_resources=self._sized(first)
        )
        self.parameters = self.changes.remember_parameters(parameters)  # where the TLS profiles' listeners go

    def route(self, cluster: Cluster, master: LocustMaster) -> None:
        """Wait for the provisioner's Envoy, then route the Host header through the run's Gateway."""
        self._wait_provisioned(cluster, first_configuration(self.scenario))
        route_to_backend(cluster, self.view, self.run_id, self.changes, master)

    def _wait_provisioned(self, cluster: Cluster, config: Configuration) -> None:
        """Block until the provisioner's Envoy Deployment has `config`'s resources and replicas and has rolled out,
        updating the run's Gateway while it lags (the provisioner watches Gateways, not ContourDeployments)."""
        parameters = self.parameters
        assert parameters is not None, "claimed first"
        timeout_s = self.scenario.kubernetes.rollout_timeout_s
        deadline = time.monotonic() + timeout_s
        sized = self._sized(config)

        def nudge() -> None:
            value = f"{provisioned.applied_text(sized)} x{config.envoy_replicas} at {time.time():.3f}"
            patch_gateway(
                cluster, parameters, [add_annotation(gateway_annotations(cluster, parameters), APPLIED, value)]
            )

        while True:
            with contextlib.suppress(NotFoundError):  # the provisioner has not made it yet
                left = max(1.0, deadline - time.monotonic())
                provisioned.wait_sized(cluster, self.workload, sized, left, nudge=nudge)
                if workloads.replicas(cluster, self.workload) == config.envoy_replicas:
                    workloads.wait_rolled_out(cluster, self.workload, max(1.0, deadline - time.monotonic()))
                    return
            if time.monotonic() > deadline:
                raise PlatformError(
                    f"the gateway provisioner has not made {self.workload} with {config.envoy_replicas} pod(s) of "
                    f"{provisioned.applied_text(sized)} in {timeout_s:.0f} s",
                    "check `kubectl get gatewayclass` (Accepted) and the log of the gateway provisioner",
                )
            nudge()
            time.sleep(provisioned.POLL_S)

    def size(self, cluster: Cluster, config: Configuration, *, fresh: bool) -> bool:
        """In place when only CPU and memory change (the pods the ContourDeployment was created with, at the first
        configuration), else through the ContourDeployment and the provisioner's rollout."""
        before = self.applied
        if before is None:
            first = first_configuration(self.scenario)
            self._wait_provisioned(cluster, first)
            same_shape, new_pods = config.envoy_replicas == first.envoy_replicas, True
        else:
            same_shape, new_pods = before.envoy_replicas == config.envoy_replicas, False
        if same_shape and not fresh and self.resize_refused is None and self._resize(cluster, config):
            return new_pods
        self._set_parameters(cluster, config)
        self._wait_provisioned(cluster, config)
        if self.resize_refused is None:
            self._resize(cluster, config)  # pods the template change left as they were, resized before
        return True

    def _resize(self, cluster: Cluster, config: Configuration) -> bool:
        """Resize the Envoy pods in place; False (and rollouts from then on) when the cluster cannot."""
        sizing = TemplateSizing(self.workload, {}, None, set(), True, lambda *_: None)
        try:
            sizing.resize(cluster, config, self.scenario.kubernetes.rollout_timeout_s)
        except ResizeUnsupported as error:
            self.resize_refused = str(error)
            return False
        return True

    def _set_parameters(self, cluster: Cluster, config: Configuration) -> None:
        """The run's ContourDeployment with `config`'s Envoy resources and replicas (one JSON patch)."""
        assert self.parameters is not None
        found = provisioned.read_parameters(cluster, self.parameters)
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": found["metadata"]["uid"]},
            {"op": "add", "path": "/spec/envoy/resources", "value": self._sized(config)},
            {"op": "add", "path": "/spec/envoy/deployment/replicas", "value": config.envoy_replicas},
        ]
        where = (*provisioned.PARAMETERS, self.parameters.namespace, self.parameters.name)
        json_patch(cluster, f"patch {self.parameters}", where, patch)

    def threads_flag(self, config: Configuration) -> int | bool | None:
        return False  # the provisioner writes Envoy's args

    def tls(self) -> TlsObjects:
        return ListenerTls(self.view, self.run_id, self.changes)  # listeners on the run's Gateway

    def limit_changes(self) -> str | None:
        if self.resize_refused is not None:
            why = self.resize_refused
            return f"rolled out by Contour's gateway provisioner at every change, each round a rollout: {why}"
        return (
            "Envoy's pods resized in place (pods/resize) when only CPU or memory changed, else rolled out by Contour's "
            "gateway provisioner"
        )

    def provisioned_by(self) -> object | None:
        found = self.found
        return f"{provisioned.PARAMETERS_KIND} {found.parameters_namespace}/{found.parameters_name}" if found else None

    def describe(self) -> dict[str, Any]:
        found = self.found
        source = f"{found.parameters_namespace}/{found.parameters_name}" if found else None
        return {**super().describe(), "copied_from": f"{provisioned.PARAMETERS_KIND} {source}"}

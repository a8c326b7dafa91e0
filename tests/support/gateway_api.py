"""Gateway API objects as a real cluster has them, for tests against a real API server: a GatewayClass with the
status its controller writes, a Gateway with listeners of the user's, and the provisioner's Envoy beside them (made
once, or by a stand-in for the provisioner that renders it again at each update of its Gateway; StandInContour: and
its Contour, with that Contour's leader-election Lease, deleting what it made when the Gateway goes)."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.gateway_object import JSON_PATCH
from runner.platforms.kubernetes.provisioned import OWNER_LABEL, PARAMETERS
from support.k8s import create, workload

GROUP, VERSION = "gateway.networking.k8s.io", "v1"
CONTOUR = "projectcontour.io/gateway-controller"
ALL = {"namespaces": {"from": "All"}}


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-27T00:00:00Z",
    }


def accepted_conditions(*, accepted: str = "True", supported: str | None = None) -> list[dict[str, Any]]:
    """The conditions a controller writes on a GatewayClass (SupportedVersion only when given)."""
    found = [
        condition(
            "Accepted",
            accepted,
            "Accepted" if accepted == "True" else "InvalidParameters",
            "" if accepted == "True" else "invalid ContourDeployment",
        )
    ]
    if supported is not None:
        reason = "SupportedVersion" if supported == "True" else "UnsupportedVersion"
        found.append(condition("SupportedVersion", supported, reason, "Gateway API CRD bundle version v0.9.0"))
    return found


def class_status(admin: Cluster, name: str, conditions: list[dict[str, Any]]) -> None:
    admin.custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "gatewayclasses", name, {"status": {"conditions": conditions}}
    )


def contour_deployment(admin: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """A ContourDeployment with no spec.envoy; returns the parametersRef that names it."""
    group, version, plural = PARAMETERS
    body = {"apiVersion": f"{group}/{version}", "kind": "ContourDeployment", "metadata": {"name": name}, "spec": {}}
    admin.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    return {"group": group, "kind": "ContourDeployment", "namespace": namespace, "name": name}


def gateway_class(admin: Cluster, name: str, parameters: dict[str, Any] | None, **status: Any) -> None:
    """A Contour GatewayClass with `accepted_conditions(**status)` as its status."""
    spec: dict[str, Any] = {"controllerName": CONTOUR}
    if parameters is not None:
        spec["parametersRef"] = parameters
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GatewayClass", "metadata": {"name": name}, "spec": spec}
    admin.custom.create_cluster_custom_object(GROUP, VERSION, "gatewayclasses", body)
    class_status(admin, name, accepted_conditions(**status))


def listener(name: str = "http", port: int = 80, protocol: str = "HTTP", **more: Any) -> dict[str, Any]:
    return {"name": name, "protocol": protocol, "port": port, **more}


def gateway(
    admin: Cluster,
    namespace: str,
    name: str,
    class_name: str,
    listeners: list[dict[str, Any]],
    *,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"gatewayClassName": class_name, "listeners": listeners, **spec},
    }
    admin.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "gateways", body)


def provisioned_envoy(admin: Cluster, namespace: str, gateway_name: str) -> None:
    """The Envoy Deployment the provisioner would have made for the Gateway (its owner label on it)."""
    manifest = workload("Deployment", namespace, f"envoy-{gateway_name}", {"envoy": {}})
    manifest["metadata"]["labels"] = {OWNER_LABEL: gateway_name}
    create(admin, manifest)


def installed(
    admin: Cluster, namespace: str, listeners: list[dict[str, Any]], *, class_name: str | None = None, **status: Any
) -> str:
    """A Gateway `gw` in `namespace` of a Contour class of its own (`class-<namespace>`, its ContourDeployment
    `params`), with the Envoy the provisioner made; returns the class's name."""
    name = class_name or f"class-{namespace}"
    gateway_class(admin, name, contour_deployment(admin, namespace, "params"), **status)
    gateway(admin, namespace, "gw", name, listeners)
    provisioned_envoy(admin, namespace, "gw")
    return name


def read(admin: Cluster, namespace: str, plural: str, name: str) -> dict[str, Any]:
    if plural == "contourdeployments":
        group, version, _ = PARAMETERS
        return dict(admin.custom.get_namespaced_custom_object(group, version, namespace, plural, name))
    return dict(admin.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name))


def envoy_resources(admin: Cluster, namespace: str, gateway_name: str) -> dict[str, Any]:
    """The resources of the Envoy container in the pod template of the Envoy made for the Gateway."""
    found = admin.apps.read_namespaced_deployment(f"envoy-{gateway_name}", namespace)
    return dict(admin.api.sanitize_for_serialization(found.spec.template.spec.containers[0].resources) or {})


class StandInProvisioner:
    """Stands in for Contour's gateway provisioner where none runs (an API server alone), in a thread from start to
    stop: like it, at every update of a Gateway in `namespace` (a new resourceVersion) whose class names a
    ContourDeployment, it renders the Gateway's Envoy (a Deployment `envoy-<gateway>` with the provisioner's owner
    label, its rollout done) with that ContourDeployment's `spec.envoy.resources`; a change of the ContourDeployment
    alone renders nothing. `rendered` lists the Gateways rendered, in order."""

    POLL_S = 0.05

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.seen: dict[str, str] = {}  # each Gateway's resourceVersion last rendered
        self.rendered: list[str] = []
        self.error: Exception | None = None  # the last render that failed (tried again at the next look)
        self.looks = 0  # looks done whole
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        while not self.stopped.wait(self.POLL_S):
            try:
                self._look()
                self.looks += 1
            except Exception as error:  # the API server busy, an object changed meanwhile: the next look tries again
                self.error = error

    def _look(self) -> None:
        gateways = self.cluster.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "gateways")
        for gateway in gateways["items"]:
            name, version = gateway["metadata"]["name"], gateway["metadata"]["resourceVersion"]
            if self.seen.get(name) != version:
                self._render(gateway)
                self.seen[name] = version
                self.rendered.append(name)
        listed = {gateway["metadata"]["name"] for gateway in gateways["items"]}
        for name in [name for name in self.seen if name not in listed]:
            self._gone(name)
            del self.seen[name]

    def _gone(self, name: str) -> None:
        """A Gateway rendered before is gone (what the provisioner made for it stays here: StandInContour's go)."""

    def _render(self, gateway: dict[str, Any]) -> None:
        custom = self.cluster.custom
        class_name = gateway["spec"]["gatewayClassName"]
        ref = custom.get_cluster_custom_object(GROUP, VERSION, "gatewayclasses", class_name)["spec"].get(
            "parametersRef"
        )
        if not ref or ref.get("kind") != "ContourDeployment":
            return
        group, version, plural = PARAMETERS
        parameters = custom.get_namespaced_custom_object(group, version, ref["namespace"], plural, ref["name"])
        resources = ((parameters.get("spec") or {}).get("envoy") or {}).get("resources") or {}
        name = f"envoy-{gateway['metadata']['name']}"
        apps = self.cluster.apps
        try:
            apps.read_namespaced_deployment(name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            manifest = workload("Deployment", self.namespace, name, {"envoy": resources})
            manifest["metadata"]["labels"] = {OWNER_LABEL: gateway["metadata"]["name"]}
            create(self.cluster, manifest)
        else:
            patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/resources", "value": resources}]
            apps.patch_namespaced_deployment(name, self.namespace, patch, _content_type=JSON_PATCH)
        done = {"observedGeneration": 1000, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        apps.patch_namespaced_deployment_status(name, self.namespace, {"status": {**done, "readyReplicas": 1}})


class StandInContour(StandInProvisioner):
    """The stand-in provisioner, making each Gateway's Contour too and deleting what it made when the Gateway goes, as
    Contour's does, with a stand-in for that Contour's leader election. The Contour is a Deployment `contour-<gateway>`
    (the owner label) and its pod (`app: contour-<gateway>`, bound to no node, so that it goes without a kubelet);
    while the pod is there the Lease `leader-elect-<gateway>` is too, made again when it is missing, as Contour's
    leader election does at its next renewal. When the Gateway goes, both Deployments go at once and the pod EXIT_S
    later (a Contour pod terminating), its Lease released on the way out (holder cleared) and left there, as the
    real provisioner and Contour leave it."""

    EXIT_S = 1.0
    CONTOUR = "gateway-sizer-test/contour"  # a label on the stand-in's Contour pods

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.exiting: dict[str, float] = {}  # a Contour pod: when it exits
        self.leases = client.CoordinationV1Api(cluster.api)
        super().__init__(cluster, namespace)

    def _render(self, gateway: dict[str, Any]) -> None:
        super()._render(gateway)
        contour = f"contour-{gateway['metadata']['name']}"
        try:
            self.cluster.apps.read_namespaced_deployment(contour, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            manifest = workload("Deployment", self.namespace, contour, {"contour": {}})
            manifest["metadata"]["labels"] = {OWNER_LABEL: gateway["metadata"]["name"]}
            create(self.cluster, manifest)
            pod = {"name": f"{contour}-0", "labels": {"app": contour, self.CONTOUR: "yes"}}
            spec = {"containers": [{"name": "contour", "image": "example/contour:1"}]}
            self.cluster.core.create_namespaced_pod(self.namespace, {"metadata": pod, "spec": spec})

    def _gone(self, name: str) -> None:
        for deployment in (f"envoy-{name}", f"contour-{name}"):
            try:
                self.cluster.apps.delete_namespaced_deployment(deployment, self.namespace)
            except ApiException as error:
                if error.status != 404:
                    raise
        self.exiting.setdefault(f"contour-{name}-0", time.monotonic() + self.EXIT_S)

    def _look(self) -> None:
        super()._look()
        pods = self.cluster.core.list_namespaced_pod(self.namespace, label_selector=f"{self.CONTOUR}=yes").items
        for pod in pods:
            name = pod.metadata.name
            lease = f"leader-elect-{pod.metadata.labels['app'].removeprefix('contour-')}"
            if name in self.exiting and time.monotonic() >= self.exiting[name]:
                with contextlib.suppress(ApiException):  # released on the way out, if it is there
                    self.leases.patch_namespaced_lease(lease, self.namespace, {"spec": {"holderIdentity": None}})
                self.cluster.core.delete_namespaced_pod(name, self.namespace)
                continue
            try:
                self.leases.read_namespaced_lease(lease, self.namespace)
            except ApiException as error:
                if error.status != 404:
                    raise
                body = {"metadata": {"name": lease}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 15}}
                self.leases.create_namespaced_lease(self.namespace, body)

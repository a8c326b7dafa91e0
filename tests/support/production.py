"""The production gateway beside a sizing fleet on the one-machine cluster: its objects as the API serves them, its
pods sampled every second (never restarted, resized or replaced), a steady load sent to it by a generator that is
not the sweep's (to its ClusterIP: an address of the cluster on this machine), the Gateway API install's own route
for that load, and what a run leaves behind."""

from __future__ import annotations

import contextlib
import http.client
import threading
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.contour_lease import RUN_LEASE
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector
from runner.platforms.kubernetes.provisioned import OWNER_LABEL, PARAMETERS
from runner.platforms.kubernetes.resize import live_pods, running_resources
from runner.platforms.kubernetes.workloads import Workload, read
from support.wait import until

GATEWAY_API = ("gateway.networking.k8s.io", "v1")
SAMPLE_S = 1.0
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"  # kube-controller-manager's, on every Deployment
# production's own route (a user's) on the test bed's Gateway, which carries none at rest (Contour programs no
# listener for a Gateway without routes); created by the test, not by the run, so left_behind does not count it
PRODUCTION_ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "production-traffic", "namespace": "gateway-loadtest"},
    "spec": {
        "parentRefs": [{"name": "gateway-sizer", "namespace": "projectcontour"}],
        "hostnames": ["external.nginx"],
        "rules": [{"backendRefs": [{"name": "nginx", "port": 80}]}],
    },
}


def served(admin: Cluster, obj: Any) -> dict[str, Any]:
    """An object as the API serves it, less what its controllers write on their own (status, and the
    resourceVersion, managedFields and generation such a write moves, and kube-controller-manager's revision
    annotation on a Deployment): its spec, labels and other annotations stay, so any write of the run's shows.
    Contour's provisioner re-renders production's Envoy Deployment with the same spec whenever a Gateway of another
    class (the run's) comes or goes: its write drops the revision annotation, which kube-controller-manager puts
    back within a second, and the API server counts each of the two writes (seen raw, every 0.1 s, on 2026-11-27:
    the annotation gone 13:54:16 and 14:01:53-54, the generation 17 -> 19, 20 -> 21, the spec unchanged)."""
    data: dict[str, Any] = admin.api.sanitize_for_serialization(obj)
    return _without_controllers_writes(data)


def _without_controllers_writes(data: dict[str, Any]) -> dict[str, Any]:
    moved = ("resourceVersion", "managedFields", "generation", "annotations")
    metadata = {k: v for k, v in (data.get("metadata") or {}).items() if k not in moved}
    annotations = (data.get("metadata") or {}).get("annotations") or {}
    metadata["annotations"] = {k: v for k, v in annotations.items() if k != REVISION_ANNOTATION}
    return {**{k: v for k, v in data.items() if k != "status"}, "metadata": metadata}


def production_objects(admin: Cluster, envoy: Workload, gateway: str | None = None) -> dict[str, Any]:
    """Production's Envoy workload and Service and (a Gateway API install) its Gateway and ContourDeployment as the
    API serves them, less their controllers' own writes (`served`)."""
    found = {"workload": served(admin, read(admin, envoy))}
    service = envoy.name if gateway else "envoy"
    found["service"] = served(admin, admin.core.read_namespaced_service(service, envoy.namespace))
    if gateway:
        found["gateway"] = _without_controllers_writes(
            admin.custom.get_namespaced_custom_object(*GATEWAY_API, envoy.namespace, "gateways", gateway)
        )
        group, version, plural = PARAMETERS
        found["parameters"] = admin.custom.get_namespaced_custom_object(
            group, version, envoy.namespace, plural, gateway
        )
    return found


def pod_states(admin: Cluster, envoy: Workload) -> dict[str, tuple[Any, ...]]:
    """Each production Envoy pod: uid, restarts, the resources its kubelet runs Envoy with and its spec's."""
    states = {}
    for pod in live_pods(admin, envoy):
        restarts = sum(s.restart_count for s in pod.status.container_statuses or [])
        spec = next(c for c in pod.spec.containers if c.name == envoy.container).resources
        states[pod.metadata.name] = (
            pod.metadata.uid,
            restarts,
            str(running_resources(admin, pod, envoy.container)),
            str(admin.api.sanitize_for_serialization(spec)),
        )
    return states


class ProductionWatch:
    """Production's Envoy pods sampled every SAMPLE_S in a thread, from start to stop: every sample must be the
    first (no pod restarted, resized, replaced, added or removed)."""

    def __init__(self, admin: Cluster, envoy: Workload) -> None:
        self.admin, self.envoy = admin, envoy
        self.first = pod_states(admin, envoy)
        self.samples: list[dict[str, tuple[Any, ...]]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            self.samples.append(pod_states(self.admin, self.envoy))

    def stop(self) -> list[dict[str, tuple[Any, ...]]]:
        """Stop sampling; returns the samples that differ from the first."""
        self.stopped.set()
        self.thread.join(timeout=30)
        return [sample for sample in self.samples if sample != self.first]


def answers(address: str, host: str = "external.nginx") -> bool:
    """Whether a gateway's ClusterIP answers GET / with `host` with a 200."""
    connection = http.client.HTTPConnection(address, 80, timeout=3)
    try:
        connection.request("GET", "/", headers={"Host": host})
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@contextlib.contextmanager
def production_route(admin: Cluster, address: str) -> Iterator[None]:
    """The Gateway API install's own route (PRODUCTION_ROUTE), served by production's Envoy at `address` before
    this yields (at most 120 s), deleted at the end."""
    route = PRODUCTION_ROUTE["metadata"]
    admin.custom.create_namespaced_custom_object(*GATEWAY_API, route["namespace"], "httproutes", PRODUCTION_ROUTE)
    try:
        until(lambda: answers(address), 120, "production's Envoy to serve its own route", poll_s=1.0)
        yield
    finally:
        admin.custom.delete_namespaced_custom_object(*GATEWAY_API, route["namespace"], "httproutes", route["name"])


class SteadyLoad:
    """GETs with the test bed's Host header to a gateway's ClusterIP at `rps` over one keep-alive connection, in a
    thread, at most `limit_s` seconds: production's own traffic, sent by a generator that is not the sweep's."""

    def __init__(self, address: str, rps: float, host: str = "external.nginx", limit_s: float = 1800) -> None:
        self.address, self.rps, self.host, self.limit_s = address, rps, host, limit_s
        self.sent = self.answered = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        connection = http.client.HTTPConnection(self.address, 80, timeout=5)
        while not self.stopped.is_set() and time.monotonic() - started < self.limit_s:
            due = started + self.sent / self.rps
            if (wait := due - time.monotonic()) > 0:
                self.stopped.wait(wait)
            self.sent += 1
            try:
                connection.request("GET", "/", headers={"Host": self.host})
                connection.getresponse().read()
                self.answered += 1
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection(self.address, 80, timeout=5)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)


def left_behind(admin: Cluster, namespace: str = "projectcontour") -> list[str]:
    """What a run made and did not delete: its Deployments, Services, ConfigMaps, HTTPRoutes, Gateways, classes,
    ContourDeployments (gateway-sizer's managed-by labels), what the provisioner made for a run's Gateway, Leases
    (the run's, and those of a run's Gateway's Contour, leader-elect-gateway-sizer-<run hash>)."""
    selector = label_selector(MANAGED_BY)
    left = []
    for ns in (namespace, "gateway-loadtest"):
        left += [
            f"Deployment {ns}/{d.metadata.name}"
            for d in admin.apps.list_namespaced_deployment(ns, label_selector=selector).items
        ]
        left += [
            f"Service {ns}/{s.metadata.name}"
            for s in admin.core.list_namespaced_service(ns, label_selector=selector).items
        ]
        left += [
            f"ConfigMap {ns}/{c.metadata.name}"
            for c in admin.core.list_namespaced_config_map(ns, label_selector=selector).items
        ]
    for plural, ns in (("gateways", namespace), ("httproutes", "gateway-loadtest")):
        items = admin.custom.list_namespaced_custom_object(*GATEWAY_API, ns, plural, label_selector=selector)["items"]
        left += [f"{plural} {ns}/{i['metadata']['name']}" for i in items]
    classes = admin.custom.list_cluster_custom_object(*GATEWAY_API, "gatewayclasses", label_selector=selector)["items"]
    left += [f"GatewayClass {i['metadata']['name']}" for i in classes]
    group, version, plural = PARAMETERS
    params = admin.custom.list_namespaced_custom_object(group, version, namespace, plural, label_selector=selector)
    left += [f"ContourDeployment {i['metadata']['name']}" for i in params["items"]]
    for lister in (admin.apps.list_namespaced_deployment, admin.apps.list_namespaced_daemon_set):
        for obj in lister(namespace).items:
            owner = (obj.metadata.labels or {}).get(OWNER_LABEL, "")
            if owner.startswith("gateway-sizer-"):  # made by the provisioner for a run's Gateway
                left.append(f"provisioned {obj.metadata.name}")
    coordination = client.CoordinationV1Api(admin.api)
    left += [f"Lease {lease.metadata.name}" for lease in coordination.list_namespaced_lease("gateway-loadtest").items]
    contours = coordination.list_namespaced_lease(namespace).items  # a run's Contour's, never production's
    return left + [f"Lease {namespace}/{c.metadata.name}" for c in contours if RUN_LEASE.fullmatch(c.metadata.name)]

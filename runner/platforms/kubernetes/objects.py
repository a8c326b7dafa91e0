"""The ground floor for the objects gateway-sizer creates in a cluster: their labels, Contour's HTTPProxy.

Every object a run creates carries MANAGED_BY (nothing without it is ever deleted) and `run_labels`: a
component, the run (its id as a label value) and the gateway it loads (`gateway_key`). Names carry a short
hash of the run id (`run_hash`). With the gateway's Lease held (lease.py), objects labelled with the
gateway but not recorded by the run are a killed run's leftovers.

A run's HTTPProxies are root proxies of their own fqdn that route `/` as the test bed's HTTPProxy for the
scenario's Host header does (`find_route`, `proxy_manifest`).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call

# Every object gateway-sizer creates carries these; nothing without them is ever deleted.
MANAGED_BY = {"app.kubernetes.io/managed-by": "gateway-sizer", "app.kubernetes.io/part-of": "gateway-sizer"}
COMPONENT_LABEL = "app.kubernetes.io/name"
RUN_LABEL = "gateway-sizer/run"
GATEWAY_LABEL = "gateway-sizer/gateway"  # a hash of the gateway's namespace/name
# Contour's HTTPProxy, a custom resource: group, version and plural for the CustomObjectsApi, and its kind.
GROUP, VERSION, PLURAL, KIND = "projectcontour.io", "v1", "httpproxies", "HTTPProxy"
# The custom resources a run creates, by kind: group, version and plural (a provisioned gateway's route is a
# Gateway API HTTPRoute, provisioned.py; a provisioned sizing fleet is a GatewayClass, a ContourDeployment and a
# Gateway, sizing_gateway.py). CLUSTER_KINDS have no namespace.
CUSTOM_KINDS = {
    KIND: (GROUP, VERSION, PLURAL),
    "HTTPRoute": ("gateway.networking.k8s.io", "v1", "httproutes"),
    "Gateway": ("gateway.networking.k8s.io", "v1", "gateways"),
    "GatewayClass": ("gateway.networking.k8s.io", "v1", "gatewayclasses"),
    "ContourDeployment": ("projectcontour.io", "v1alpha1", "contourdeployments"),
}
CLUSTER_KINDS = frozenset({"GatewayClass"})
GONE_TIMEOUT_S = 60.0
GONE_POLL_S = 0.5


def run_hash(run_id: str) -> str:
    """The short hash of a run id that ends the names of the run's objects."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:8]


def gateway_key(namespace: str, name: str) -> str:
    """The label value that ties a run's objects to the gateway they load."""
    return hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:16]


def label_value(text: str) -> str:
    """`text` cut to a valid label value: at most 63 characters, alphanumeric at both ends."""
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", text[:63])


def run_labels(component: str, run_id: str, gateway: str) -> dict[str, str]:
    """The labels of an object a run creates: its component, the run, the gateway (`gateway_key`)."""
    return {COMPONENT_LABEL: component, RUN_LABEL: label_value(run_id), GATEWAY_LABEL: gateway, **MANAGED_BY}


def label_selector(labels: dict[str, str]) -> str:
    """A label selector matching objects that carry every one of `labels`."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def wait_gone(read: Callable[[], object], what: str, timeout_s: float = GONE_TIMEOUT_S) -> None:
    """Return once `read` raises NotFoundError; PlatformError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            read()
        except NotFoundError:
            return
        time.sleep(GONE_POLL_S)
    raise PlatformError(f"{what} is still there {timeout_s:.0f} s after deleting it")


def host_of(host_header: str) -> str:
    """The host name of a Host header (the scenario's is a host name with an optional :port)."""
    return host_header.rsplit(":", 1)[0].lower()


@dataclass(frozen=True)
class TestbedRoute:
    """What the test bed's HTTPProxy for the Host header routes `/` to, and where it lives."""

    namespace: str
    proxy: str
    services: list[dict[str, Any]]
    ingress_class: str | None = None


def _routes_root(route: dict[str, Any]) -> bool:
    """A route with no conditions, or a prefix `/` condition, matches every path."""
    conditions = route.get("conditions") or []
    return not conditions or any(c.get("prefix") == "/" for c in conditions)


def find_route(cluster: Cluster, namespace: str, host: str) -> TestbedRoute:
    """The Services the HTTPProxy in `namespace` whose virtualhost.fqdn is `host` sends `/` to."""
    found: Any = call(f"list HTTPProxies in {namespace}", cluster.custom.list_namespaced_custom_object,
                      GROUP, VERSION, namespace, PLURAL)  # fmt: skip
    for item in found.get("items", []):
        spec = item.get("spec") or {}
        if str((spec.get("virtualhost") or {}).get("fqdn", "")).lower() != host:
            continue
        name = item["metadata"]["name"]
        routes = [r for r in spec.get("routes") or [] if r.get("services")]
        route = next((r for r in routes if _routes_root(r)), routes[0] if routes else None)
        if route is None:
            raise UsageError(
                f"HTTPProxy {namespace}/{name} for {host} routes to no Service (includes only?)",
                "TLS profiles copy its routes' services: give it a route to the backend Service",
            )
        return TestbedRoute(namespace, name, list(route["services"]), spec.get("ingressClassName"))
    raise UsageError(
        f"no HTTPProxy in {namespace} has virtualhost.fqdn {host}: TLS profiles route like it",
        "apply k8s/manifests/backend (or the chart), or set load.host_header to your HTTPProxy's fqdn",
    )


def proxy_manifest(name: str, labels: dict[str, str], fqdn: str, route: TestbedRoute, *, tls: bool = True) -> dict:
    """A root HTTPProxy for `fqdn` routing `/` as the test bed does; with `tls`, terminating TLS with the
    Secret `name`."""
    virtualhost: dict[str, Any] = {"fqdn": fqdn}
    if tls:
        virtualhost["tls"] = {"secretName": name}
    spec: dict[str, Any] = {
        "virtualhost": virtualhost,
        "routes": [{"conditions": [{"prefix": "/"}], "services": route.services}],
    }
    if route.ingress_class:
        spec["ingressClassName"] = route.ingress_class
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": route.namespace, "labels": labels},
        "spec": spec,
    }


def proxy_problem(status: dict[str, Any]) -> str:
    """An HTTPProxy's status in a few words: `invalid: Secret not found` / `no status yet`."""
    current = status.get("currentStatus")
    if not current:
        return "no status yet"
    errors = [e.get("message") for c in status.get("conditions") or [] for e in c.get("errors") or []]
    detail = next((e for e in errors if e), status.get("description"))
    return f"{current}: {detail}" if detail else str(current)

"""The HTTPRoute that carries a provisioned gateway's traffic (kubernetes.gateway.kind: gateway, provisioned.py).

The run creates one HTTPRoute in the backend's namespace, attached to the Gateway, that sends every path of the
scenario's Host header to the backend's Service; it is recorded before it exists (created.py), deleted by undo
and restore, and a killed run's is deleted first. The run waits until the Gateway accepts it and Envoy serves it.
"""

from __future__ import annotations

import time
from typing import Any

from runner.errors import PlatformError
from runner.locust import LoadTarget, LocustMaster
from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.created import RunObjects
from runner.platforms.kubernetes.gateway_check import wait_served
from runner.platforms.kubernetes.gateway_object import GATEWAY_GROUP, GATEWAY_VERSION, gateway_api
from runner.platforms.kubernetes.objects import (
    COMPONENT_LABEL,
    GATEWAY_LABEL,
    MANAGED_BY,
    gateway_key,
    host_of,
    label_selector,
    run_hash,
    run_labels,
)
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.provisioned import POLL_S
from runner.scenario import Scenario

COMPONENT = "gateway-sizer-httproute"


def route_to_backend(cluster: Cluster, scenario: Scenario, run_id: str, changes: ClusterChanges,
                     master: LocustMaster) -> None:  # fmt: skip
    """Create the run's HTTPRoute for the Host header (a killed run's deleted first), and wait until the Gateway
    accepts it and Envoy serves it."""
    objects = RunObjects(changes)
    envoy = scenario.envoy.workload
    key = gateway_key(envoy.namespace, envoy.name)
    body = route_manifest(scenario, run_id, key)
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    for leftover in list_routes(cluster, namespace, {**MANAGED_BY, GATEWAY_LABEL: key, COMPONENT_LABEL: COMPONENT}):
        if leftover != name and objects.recorded("HTTPRoute", namespace, leftover) is None:
            objects.delete(cluster, "HTTPRoute", namespace, leftover)
    objects.record("HTTPRoute", namespace, [name])
    objects.create_custom(cluster, body)
    wait_route_accepted(cluster, namespace, name)
    wait_served(master, LoadTarget(scenario.kubernetes.gateway_url, scenario.load.host_header, "/"))


def route_name(run_id: str) -> str:
    return f"gateway-sizer-route-{run_hash(run_id)}"


def route_manifest(
    scenario: Scenario,
    run_id: str,
    gateway: str,
    *,
    name: str | None = None,
    hostname: str | None = None,
    listener: str | None = None,
    component: str = COMPONENT,
) -> dict[str, Any]:
    """An HTTPRoute in the backend's namespace, attached to the Gateway (to its `listener` only, when given),
    that sends every path of `hostname` (default: the scenario's Host header) to the backend's Service (named
    like its workload, port 80, as the test bed's chart makes it)."""
    ref, backend = scenario.kubernetes.gateway, scenario.backend.workload
    parent = {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": ref.namespace, "name": ref.name}
    if listener:
        parent["sectionName"] = listener
    return {
        "apiVersion": f"{GATEWAY_GROUP}/{GATEWAY_VERSION}",
        "kind": "HTTPRoute",
        "metadata": {
            "name": name or route_name(run_id),
            "namespace": backend.namespace,
            "labels": run_labels(component, run_id, gateway),
        },
        "spec": {
            "parentRefs": [parent],
            "hostnames": [hostname or host_of(scenario.load.host_header)],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": backend.name, "port": 80}],
                }
            ],
        },
    }


ROUTE_TIMEOUT_S = 90.0  # for Contour to accept a new HTTPRoute


def list_routes(cluster: Cluster, namespace: str, labels: dict[str, str]) -> list[str]:
    """The names of the HTTPRoutes in `namespace` that carry every one of `labels`."""
    found: Any = call(f"list HTTPRoutes in {namespace}", cluster.custom.list_namespaced_custom_object, GATEWAY_GROUP,
                      GATEWAY_VERSION, namespace, "httproutes", label_selector=label_selector(labels))  # fmt: skip
    return [item["metadata"]["name"] for item in found.get("items", [])]


def wait_route_accepted(cluster: Cluster, namespace: str, name: str, timeout_s: float = ROUTE_TIMEOUT_S) -> None:
    """Return once the Gateway has accepted the HTTPRoute and resolved its backend; PlatformError with the
    route's condition after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        route = gateway_api(cluster, f"read HTTPRoute {namespace}/{name}", "httproutes", namespace, name)
        problem = route_problem(route)
        if problem is None:
            return
        if time.monotonic() > deadline:
            raise PlatformError(
                f"HTTPRoute {namespace}/{name} not served after {timeout_s:.0f} s: {problem}",
                "check that the Gateway's listener allows routes from that namespace (allowedRoutes), and "
                "Contour's log",
            )
        time.sleep(POLL_S)


def route_problem(route: dict[str, Any]) -> str | None:
    """Why the Gateway does not serve an HTTPRoute yet (its parent's conditions), or None once Accepted and
    its references resolved."""
    parents = (route.get("status") or {}).get("parents") or []
    if not parents:
        return "no status from Contour yet"
    conditions = {c.get("type"): c for c in parents[0].get("conditions") or []}
    for kind in ("Accepted", "ResolvedRefs"):
        condition = conditions.get(kind)
        if condition is None or condition.get("status") != "True":
            detail = (condition or {}).get("message") or "not reported"
            return f"{kind} is not True: {detail}"
    return None

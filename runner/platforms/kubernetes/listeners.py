"""Which listener of a real Gateway takes the run's HTTPRoute, read as the Gateway is, before any change.

The run's HTTPRoute (httproute.py) lives in the backend's namespace, names the Gateway without a sectionName and
one hostname (the load's Host header), and the load is plain HTTP. A listener takes it when its protocol is HTTP,
its `allowedRoutes.namespaces` lets the backend's namespace in (`Same`, the Gateway API's default: only the
Gateway's own namespace; `All`; `Selector`: the namespace's labels), its `allowedRoutes.kinds` (when set) names
HTTPRoute, and its `hostname` (when set; `*.example.com` takes any name under example.com) takes the Host header.
No listener that does: one line naming what stops each, and the fix. One that does: its port is where the load
goes (the provisioner's Envoy Service exposes each listener's port), 80 preferred when several take it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.findings import Finding
from runner.platforms.kubernetes.gateway_object import GATEWAY_GROUP, gateway_api
from runner.platforms.kubernetes.objects import host_of
from runner.scenario import Scenario

HTTP_PORT = 80
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # every namespace carries it (Kubernetes >= 1.22)


@dataclass(frozen=True)
class Attachment:
    """The listener of the Gateway the run's HTTPRoute attaches to, and its port."""

    listener: str
    port: int


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against labels;
    an empty selector matches everything."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def hostname_takes(listener_hostname: str | None, hostname: str) -> bool:
    """A listener's hostname takes a route's exact hostname: unset takes any; `*.example.com` any name below
    example.com (not example.com itself); else the same name."""
    if not listener_hostname:
        return True
    if listener_hostname.startswith("*."):
        return hostname.endswith(listener_hostname[1:]) and len(hostname) > len(listener_hostname) - 1
    return listener_hostname.lower() == hostname.lower()


def _namespaces_problem(
    listener: dict[str, Any], gateway_namespace: str, route_namespace: str, labels: dict[str, str] | None
) -> str | None:
    namespaces = (listener.get("allowedRoutes") or {}).get("namespaces") or {}
    allowed = namespaces.get("from") or "Same"
    if allowed == "All":
        return None
    if allowed == "Same":
        if route_namespace == gateway_namespace:
            return None
        return f"allows routes from its own namespace {gateway_namespace} only (allowedRoutes.namespaces.from: Same)"
    if allowed == "Selector" and selector_matches(namespaces.get("selector") or {}, labels or {}):
        return None
    return f"allowedRoutes.namespaces.from: {allowed} does not select namespace {route_namespace}"


def _kinds_problem(listener: dict[str, Any]) -> str | None:
    kinds = (listener.get("allowedRoutes") or {}).get("kinds")
    if not kinds:
        return None  # an HTTP listener's default: HTTPRoute
    if any(k.get("kind") == "HTTPRoute" and (k.get("group") or GATEWAY_GROUP) == GATEWAY_GROUP for k in kinds):
        return None
    return f"allowedRoutes.kinds ({', '.join(str(k.get('kind')) for k in kinds)}) does not name HTTPRoute"


def listener_problem(
    listener: dict[str, Any], gateway_namespace: str, route_namespace: str, labels: dict[str, str] | None, host: str
) -> str | None:
    """Why this listener does not take the run's HTTPRoute (None: it does)."""
    if listener.get("protocol") != "HTTP":
        return f"protocol {listener.get('protocol')}, not HTTP"
    problem = _namespaces_problem(listener, gateway_namespace, route_namespace, labels) or _kinds_problem(listener)
    if problem is None and not hostname_takes(listener.get("hostname"), host):
        problem = f"hostname {listener.get('hostname')} does not take the load's Host header {host}"
    return problem


def _fix(problem: str, listener: str, what: str, route_namespace: str, hostname: str | None) -> str:
    if "protocol" in problem:
        return f"add an HTTP listener to {what} that allows routes from namespace {route_namespace}"
    if "allowedRoutes.namespaces" in problem:
        return (
            f"set allowedRoutes.namespaces.from: All (or a Selector that matches namespace {route_namespace}) on "
            f"listener {listener} of {what}, or add an HTTP listener that does"
        )
    if "allowedRoutes.kinds" in problem:
        return f"add kind HTTPRoute to allowedRoutes.kinds of listener {listener} of {what}"
    example = f" (e.g. gateway-sizer{hostname[1:]})" if hostname and hostname.startswith("*.") else ""
    return (
        f"set load.host_header to a name listener {listener} takes{example} that none of your routes serves, or add "
        f"an HTTP listener without a hostname to {what}"
    )


def attachment(
    gateway: dict[str, Any], route_namespace: str, labels: dict[str, str] | None, host: str
) -> Attachment | Finding:
    """The listener that takes the run's HTTPRoute (port 80's when several do), or why none does (a refusal)."""
    metadata = gateway.get("metadata") or {}
    namespace, what = str(metadata.get("namespace")), f"Gateway {metadata.get('namespace')}/{metadata.get('name')}"
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    taking, problems = [], []
    for listener in listeners:
        problem = listener_problem(listener, namespace, route_namespace, labels, host)
        if problem is None:
            taking.append(Attachment(str(listener.get("name")), int(listener.get("port") or HTTP_PORT)))
        else:
            problems.append((listener, problem))
    if taking:
        return next((found for found in taking if found.port == HTTP_PORT), taking[0])
    if not problems:
        return Finding(f"{what} has no listener", f"add an HTTP listener that allows routes from {route_namespace}")
    said = "; ".join(f"listener {item.get('name')} (port {item.get('port')}): {problem}" for item, problem in problems)
    http = [(item, problem) for item, problem in problems if item.get("protocol") == "HTTP"]
    first, problem = http[0] if http else problems[0]
    return Finding(
        f"{what} takes no HTTPRoute of the run's (namespace {route_namespace}, hostname {host}): {said}",
        _fix(problem, str(first.get("name")), what, route_namespace, first.get("hostname")),
    )


def read_attachment(cluster: Cluster, scenario: Scenario, gateway: dict[str, Any]) -> Attachment | Finding:
    """`attachment` for the scenario's HTTPRoute, the backend namespace's labels read when a listener selects
    namespaces by label."""
    route_namespace = scenario.backend.workload.namespace
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    selects = any(
        ((item.get("allowedRoutes") or {}).get("namespaces") or {}).get("from") == "Selector" for item in listeners
    )
    labels = None
    if selects:
        found = call(f"read Namespace {route_namespace}", cluster.core.read_namespace, route_namespace)
        labels = {NAMESPACE_NAME_LABEL: route_namespace, **(found.metadata.labels or {})}
    return attachment(gateway, route_namespace, labels, host_of(scenario.load.host_header))


def with_port(scenario: Scenario, port: int) -> Scenario:
    """The scenario with its gateway URL on `port` (the provisioner's Envoy Service exposes each listener's port);
    the same scenario for port 80."""
    if port == HTTP_PORT:
        return scenario
    url = f"{scenario.kubernetes.gateway_url.rstrip('/')}:{port}"
    return scenario.model_copy(update={"kubernetes": scenario.kubernetes.model_copy(update={"gateway_url": url})})


def routed(cluster: Cluster, scenario: Scenario) -> Scenario:
    """The scenario with the load sent to the port of the Gateway's listener that takes the run's HTTPRoute;
    UsageError (one line naming what stops each listener, and the fix) when none does."""
    ref = scenario.kubernetes.gateway
    found = read_attachment(
        cluster,
        scenario,
        gateway_api(cluster, f"read Gateway {ref.namespace}/{ref.name}", "gateways", ref.namespace, ref.name),
    )
    if isinstance(found, Finding):
        raise found.error()
    return with_port(scenario, found.port)

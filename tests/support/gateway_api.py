"""Gateway API objects as a real cluster has them, for tests against a real API server: a GatewayClass with the
status its controller writes, a Gateway with listeners of the user's, and the provisioner's Envoy beside them."""

from __future__ import annotations

from typing import Any

from runner.platforms.kubernetes.connection import Cluster
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
    admin: Cluster, namespace: str, name: str, class_name: str, listeners: list[dict[str, Any]], **spec: Any
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": name},
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

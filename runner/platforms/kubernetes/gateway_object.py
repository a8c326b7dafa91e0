"""The Gateway API Gateway of a provisioned gateway as an object (provisioned.py): read it, annotate it, add and
remove the run's listeners, read their status. Every change is a JSON patch with a `test` of what it changes.

The functions take the run's record of the gateway (provisioned.Parameters, or anything with its names).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.workloads import CHANGED_BY, refuse_foreign_changes

GATEWAY_GROUP, GATEWAY_VERSION = "gateway.networking.k8s.io", "v1"
APPLIED = "gateway-sizer/applied"  # on the Gateway: the Envoy resources the run asked, to make the provisioner look


class GatewayRecord(Protocol):
    """What the run records of a Gateway: its names, and the listeners the run added."""

    gateway_namespace: str
    gateway_name: str
    listeners: list[str]

    @property
    def gateway(self) -> str: ...


def gateway_api(cluster: Cluster, action: str, plural: str, namespace: str | None, name: str | None = None) -> Any:
    """Read (name given) or list (namespace None: in every namespace) a Gateway API object."""
    custom = cluster.custom
    if name is None:
        if namespace is None:
            return call(action, custom.list_cluster_custom_object, GATEWAY_GROUP, GATEWAY_VERSION, plural)
        return call(action, custom.list_namespaced_custom_object, GATEWAY_GROUP, GATEWAY_VERSION, namespace, plural)
    if namespace is None:
        return call(action, custom.get_cluster_custom_object, GATEWAY_GROUP, GATEWAY_VERSION, plural, name)
    return call(action, custom.get_namespaced_custom_object, GATEWAY_GROUP, GATEWAY_VERSION, namespace, plural, name)


JSON_PATCH = "application/json-patch+json"  # the client sends a list as a merge patch unless told


def json_patch(cluster: Cluster, action: str, where: tuple[str, str, str, str, str], patch: list[Any]) -> None:
    """Apply a JSON patch to the custom object at (group, version, plural, namespace, name)."""
    group, version, plural, namespace, name = where
    call(action, cluster.custom.patch_namespaced_custom_object, group, version, namespace, plural, name, patch,
         _content_type=JSON_PATCH)  # fmt: skip


def annotation_path(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def patch_gateway(cluster: Cluster, gateway: GatewayRecord, patch: list[dict[str, Any]]) -> None:
    where = (GATEWAY_GROUP, GATEWAY_VERSION, "gateways", gateway.gateway_namespace, gateway.gateway_name)
    json_patch(cluster, f"annotate {gateway.gateway}", where, patch)


def gateway_annotations(cluster: Cluster, gateway: GatewayRecord) -> dict[str, str]:
    return dict((read_gateway(cluster, gateway).get("metadata") or {}).get("annotations") or {})


def changed_by(cluster: Cluster, gateway: GatewayRecord) -> str | None:
    """The run whose changes the Gateway's ContourDeployment still carries (the Gateway's annotation)."""
    return gateway_annotations(cluster, gateway).get(CHANGED_BY)


def mark_changed(cluster: Cluster, gateway: GatewayRecord, run_id: str) -> None:
    """Annotate the Gateway as changed by `run_id`, before the run's first change; UsageError when it carries
    another run's changes."""
    annotations = gateway_annotations(cluster, gateway)
    holder = annotations.get(CHANGED_BY)
    refuse_foreign_changes(gateway.gateway, holder, run_id)
    if holder == run_id:
        return
    patch_gateway(cluster, gateway, [add_annotation(annotations, CHANGED_BY, run_id)])


def add_annotation(annotations: dict[str, str], key: str, value: str) -> dict[str, Any]:
    """The JSON patch operation that sets annotation `key` (the whole map when there is none yet: an empty
    map is not kept, so a path into it would not exist)."""
    if not annotations:
        return {"op": "add", "path": "/metadata/annotations", "value": {key: value}}
    return {"op": "add", "path": annotation_path(key), "value": value}


def add_listeners(
    cluster: Cluster, gateway: GatewayRecord, listeners: list[dict[str, Any]], save: Callable[[], None]
) -> None:
    """Add listeners to the Gateway (the TLS profiles' HTTPS listeners), each recorded (`save`) before the patch
    that adds it; one already there (a resumed run's) is left as it is."""
    found = read_gateway(cluster, gateway)
    present = {listener.get("name") for listener in (found.get("spec") or {}).get("listeners") or []}
    new = [listener for listener in listeners if listener["name"] not in present]
    if not new:
        return
    gateway.listeners += [listener["name"] for listener in new if listener["name"] not in gateway.listeners]
    save()
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": found["metadata"]["uid"]}]
    patch += [{"op": "add", "path": "/spec/listeners/-", "value": listener} for listener in new]
    patch_gateway(cluster, gateway, patch)


def read_gateway(cluster: Cluster, gateway: GatewayRecord) -> dict[str, Any]:
    found: Any = gateway_api(cluster, f"read {gateway.gateway}", "gateways", gateway.gateway_namespace,
                             gateway.gateway_name)  # fmt: skip
    return dict(found)


def listener_status(cluster: Cluster, gateway: GatewayRecord) -> dict[str, str]:
    """Each listener of the Gateway's status: "" once Contour has programmed it and resolved its references,
    else the first condition that is not True."""
    found: dict[str, str] = {}
    for listener in (read_gateway(cluster, gateway).get("status") or {}).get("listeners") or []:
        conditions = {c.get("type"): c for c in listener.get("conditions") or []}
        problem = ""
        for kind in ("Programmed", "ResolvedRefs"):
            condition = conditions.get(kind)
            if condition is None or condition.get("status") != "True":
                problem = f"{kind} is not True: {(condition or {}).get('message') or 'not reported'}"
                break
        found[str(listener.get("name"))] = problem
    return found


def remove_listeners(cluster: Cluster, gateway: GatewayRecord) -> list[str]:
    """Take the run's listeners off the Gateway (by name, each index tested); returns their names."""
    listeners = (read_gateway(cluster, gateway).get("spec") or {}).get("listeners") or []
    indices = [i for i, listener in enumerate(listeners) if listener.get("name") in gateway.listeners]
    patch: list[dict[str, Any]] = []
    for index in reversed(indices):
        name = listeners[index]["name"]
        patch += [{"op": "test", "path": f"/spec/listeners/{index}/name", "value": name},
                  {"op": "remove", "path": f"/spec/listeners/{index}"}]  # fmt: skip
    if patch:
        patch_gateway(cluster, gateway, patch)
    removed = [listeners[i]["name"] for i in indices]
    gateway.listeners = []
    return removed


def unmark(cluster: Cluster, gateway: GatewayRecord, run_id: str) -> None:
    annotations = gateway_annotations(cluster, gateway)
    patch: list[dict[str, Any]] = []
    if annotations.get(CHANGED_BY) == run_id:
        patch += [{"op": "test", "path": annotation_path(CHANGED_BY), "value": run_id},
                  {"op": "remove", "path": annotation_path(CHANGED_BY)}]  # fmt: skip
    if APPLIED in annotations:
        patch.append({"op": "remove", "path": annotation_path(APPLIED)})
    if patch:
        patch_gateway(cluster, gateway, patch)


def touch(cluster: Cluster, gateway: GatewayRecord) -> None:
    """Update the Gateway and put it back as it was (an annotation added, then removed): two reconciles."""
    annotations = gateway_annotations(cluster, gateway)
    patch_gateway(cluster, gateway, [add_annotation(annotations, APPLIED, f"restore at {time.time():.3f}")])
    patch_gateway(cluster, gateway, [{"op": "remove", "path": annotation_path(APPLIED)}])

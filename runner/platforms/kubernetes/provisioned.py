"""A gateway that Contour's gateway provisioner owns: a Gateway API Gateway, sized through its ContourDeployment.

For a Gateway of a GatewayClass whose controller is Contour's gateway provisioner, the provisioner makes a
Contour (`contour-<gateway>`) and an Envoy (`envoy-<gateway>`, a DaemonSet or a Deployment) and writes their
whole spec from the ContourDeployment the GatewayClass names (`spec.parametersRef`) each time it reconciles the
Gateway. A patch to that Envoy would be put back at the next reconcile, so a run sizes Envoy where its owner
reads it: `spec.envoy.resources` of the ContourDeployment. The provisioner watches Gateways and GatewayClasses,
not ContourDeployments, so after each change the run writes the resources it asked into an annotation of the
Gateway (`gateway-sizer/applied`): an update of the Gateway, which the provisioner reconciles. The run then
waits for Envoy's pod template to carry the new resources and for the rollout.

A ContourDeployment sizes every Gateway of its class, so a class that provisions other Gateways too is
refused: resizing it would resize their Envoys at their next reconcile. What the run changes is recorded in
the run directory before the change (`Parameters`, originals.py), and undone on every exit and by `restore`:
the ContourDeployment's original resources go back, the annotations come off (one more reconcile), and the
run waits until Envoy runs with its own resources again.

Traffic reaches the backend through an HTTPRoute the run creates (httproute.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.workloads import CHANGED_BY, Workload
from runner.quantities import parse_cpu, parse_memory
from runner.scenario import Scenario

GATEWAY_GROUP, GATEWAY_VERSION = "gateway.networking.k8s.io", "v1"
PARAMETERS = ("projectcontour.io", "v1alpha1", "contourdeployments")
PARAMETERS_KIND = "ContourDeployment"
APPLIED = "gateway-sizer/applied"  # on the Gateway: the Envoy resources the run asked, to make the provisioner look
OWNER_LABEL = "projectcontour.io/owning-gateway-name"  # on what the provisioner made for a Gateway
POLL_S = 1.0


@dataclass
class Parameters:
    """A provisioned gateway's ContourDeployment as it was before the run changed it, and what the run did:
    `changed` (its Envoy resources), `marked` (the Gateway carries the run's changed-by annotation)."""

    namespace: str
    name: str
    gateway_namespace: str
    gateway_name: str
    envoy: Workload
    envoy_resources: dict[str, Any] | None = None
    changed: bool = False
    marked: bool = False
    listeners: list[str] = field(default_factory=list)  # the run's HTTPS listeners on the Gateway (TLS profiles)

    @property
    def gateway(self) -> str:
        return f"Gateway {self.gateway_namespace}/{self.gateway_name}"

    def __str__(self) -> str:
        return f"{PARAMETERS_KIND} {self.namespace}/{self.name}"


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


def find(cluster: Cluster, scenario: Scenario) -> Parameters:
    """The scenario's Gateway, checked to be provisioned by Contour's gateway provisioner alone in its class,
    and the ContourDeployment that sizes its Envoy, with Envoy's resources as they are now. UsageError (one
    line naming the fix) for a Gateway that is missing, of another controller's class, of a class without a
    ContourDeployment or shared with other Gateways, or whose Envoy the provisioner has not made."""
    ref = scenario.kubernetes.gateway
    what = f"Gateway {ref.namespace}/{ref.name}"
    try:
        gateway = gateway_api(cluster, f"read {what}", "gateways", ref.namespace, ref.name)
    except NotFoundError:
        raise UsageError(
            f"no {what} (kubernetes.gateway)", "create it, or point kubernetes.gateway at yours (namespace, name)"
        ) from None
    class_name = str((gateway.get("spec") or {}).get("gatewayClassName", ""))
    try:
        gateway_class = gateway_api(cluster, f"read GatewayClass {class_name}", "gatewayclasses", None, class_name)
    except NotFoundError:
        raise UsageError(f"{what} names GatewayClass {class_name}, which does not exist", "create it") from None
    spec = gateway_class.get("spec") or {}
    controller = spec.get("controllerName")
    if controller != ref.controller_name:
        raise UsageError(
            f"{what} is of GatewayClass {class_name}, whose controller is {controller}, not Contour's gateway "
            f"provisioner ({ref.controller_name})",
            "size a Gateway of a Contour GatewayClass, or set kubernetes.gateway.controller_name to your "
            "provisioner's --gateway-controller-name",
        )
    params = spec.get("parametersRef") or {}
    if params.get("kind") != PARAMETERS_KIND or params.get("group") != PARAMETERS[0] or not params.get("namespace"):
        raise UsageError(
            f"GatewayClass {class_name} names no {PARAMETERS_KIND} (spec.parametersRef), where the run sets "
            "Envoy's resources",
            "give it one (docs/kubernetes.md, section Gateway API)",
        )
    others = sorted(
        f"{item['metadata']['namespace']}/{item['metadata']['name']}"
        for item in gateway_api(cluster, "list Gateways", "gateways", None).get("items", [])
        if (item.get("spec") or {}).get("gatewayClassName") == class_name
        and (item["metadata"]["namespace"], item["metadata"]["name"]) != (ref.namespace, ref.name)
    )
    if others:
        raise UsageError(
            f"GatewayClass {class_name} also provisions Gateway(s) {', '.join(others)}: its {PARAMETERS_KIND} "
            f"sizes their Envoys too",
            f"give {what} a GatewayClass and {PARAMETERS_KIND} of its own",
        )
    parameters = Parameters(
        str(params["namespace"]), str(params["name"]), ref.namespace, ref.name,
        _provisioned_envoy(cluster, scenario, what),
    )  # fmt: skip
    parameters.envoy_resources = envoy_resources(cluster, parameters)
    return parameters


def _provisioned_envoy(cluster: Cluster, scenario: Scenario, gateway: str) -> Workload:
    ref = scenario.envoy.workload
    try:
        envoy = workloads.find(cluster, ref, "envoy")
    except UsageError:
        raise UsageError(
            f"the provisioner has made no Envoy for {gateway} (no DaemonSet or Deployment {ref.namespace}/{ref.name})",
            "check that the GatewayClass is Accepted and the gateway provisioner runs "
            "(kubectl get gatewayclass; its logs)",
        ) from None
    labels = workloads.read(cluster, envoy).metadata.labels or {}
    if labels.get(OWNER_LABEL) != scenario.kubernetes.gateway.name:
        raise UsageError(
            f"{envoy} is not the provisioner's Envoy for {gateway} "
            f"(no label {OWNER_LABEL}={scenario.kubernetes.gateway.name})",
            "size it with kubernetes.gateway.kind: httpproxy",
        )
    return envoy


def _read_parameters(cluster: Cluster, parameters: Parameters) -> dict[str, Any]:
    group, version, plural = PARAMETERS
    try:
        found: Any = call(f"read {parameters}", cluster.custom.get_namespaced_custom_object, group, version,
                          parameters.namespace, plural, parameters.name)  # fmt: skip
        return dict(found)
    except NotFoundError:
        raise UsageError(f"{parameters}, named by the Gateway's class, does not exist", "create it") from None


def envoy_resources(cluster: Cluster, parameters: Parameters) -> dict[str, Any] | None:
    """The ContourDeployment's `spec.envoy.resources` (None when unset or empty)."""
    envoy = (_read_parameters(cluster, parameters).get("spec") or {}).get("envoy") or {}
    return envoy.get("resources") or None


def set_envoy_resources(cluster: Cluster, parameters: Parameters, resources: dict[str, Any] | None) -> None:
    """Replace the ContourDeployment's `spec.envoy.resources` (None removes them), in one JSON patch that
    fails when the object was replaced meanwhile."""
    found = _read_parameters(cluster, parameters)
    metadata, spec = found["metadata"], found.get("spec")
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": metadata["uid"]}]
    if spec is None:
        patch.append({"op": "add", "path": "/spec", "value": {}})
    if (spec or {}).get("envoy") is None:
        patch.append({"op": "add", "path": "/spec/envoy", "value": {}})
    if resources:
        patch.append({"op": "add", "path": "/spec/envoy/resources", "value": resources})
    elif ((spec or {}).get("envoy") or {}).get("resources") is not None:
        patch.append({"op": "remove", "path": "/spec/envoy/resources"})
    _json_patch(cluster, f"patch {parameters}", (*PARAMETERS, parameters.namespace, parameters.name), patch)


JSON_PATCH = "application/json-patch+json"  # the client sends a list as a merge patch unless told


def _json_patch(cluster: Cluster, action: str, where: tuple[str, str, str, str, str], patch: list[Any]) -> None:
    """Apply a JSON patch to the custom object at (group, version, plural, namespace, name)."""
    group, version, plural, namespace, name = where
    call(action, cluster.custom.patch_namespaced_custom_object, group, version, namespace, plural, name, patch,
         _content_type=JSON_PATCH)  # fmt: skip


def _annotation_path(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def _patch_gateway(cluster: Cluster, parameters: Parameters, patch: list[dict[str, Any]]) -> None:
    where = (GATEWAY_GROUP, GATEWAY_VERSION, "gateways", parameters.gateway_namespace, parameters.gateway_name)
    _json_patch(cluster, f"annotate {parameters.gateway}", where, patch)


def gateway_annotations(cluster: Cluster, parameters: Parameters) -> dict[str, str]:
    return dict((_read_gateway(cluster, parameters).get("metadata") or {}).get("annotations") or {})


def changed_by(cluster: Cluster, parameters: Parameters) -> str | None:
    """The run whose changes the Gateway's ContourDeployment still carries (the Gateway's annotation)."""
    return gateway_annotations(cluster, parameters).get(CHANGED_BY)


def mark_changed(cluster: Cluster, parameters: Parameters, run_id: str) -> None:
    """Annotate the Gateway as changed by `run_id`, before the run's first change; UsageError when it carries
    another run's changes."""
    annotations = gateway_annotations(cluster, parameters)
    holder = annotations.get(CHANGED_BY)
    workloads.refuse_foreign_changes(parameters.gateway, holder, run_id)
    if holder == run_id:
        return
    _patch_gateway(cluster, parameters, [_add_annotation(annotations, CHANGED_BY, run_id)])


def _add_annotation(annotations: dict[str, str], key: str, value: str) -> dict[str, Any]:
    """The JSON patch operation that sets annotation `key` (the whole map when there is none yet: an empty
    map is not kept, so a path into it would not exist)."""
    if not annotations:
        return {"op": "add", "path": "/metadata/annotations", "value": {key: value}}
    return {"op": "add", "path": _annotation_path(key), "value": value}


def applied_text(resources: dict[str, Any] | None) -> str:
    """The annotation value that names Envoy's resources: `limits cpu=250m memory=256Mi; requests cpu=250m ...`."""
    if not resources:
        return "the provisioner's default"
    parts = [f"{kind} " + " ".join(f"{k}={v}" for k, v in sorted(values.items())) for kind, values in
             sorted(resources.items()) if values]  # fmt: skip
    return "; ".join(parts)


def apply_envoy_resources(
    cluster: Cluster, parameters: Parameters, resources: dict[str, Any] | None, timeout_s: float
) -> bool:
    """Give the provisioned Envoy `resources` through its ContourDeployment and have the provisioner roll it
    out: the Gateway's `applied` annotation changes, so the provisioner reconciles it. Returns once Envoy's pod
    template carries them and the rollout is done; False when Envoy had them already (no rollout)."""
    if _template_sized(cluster, parameters.envoy, resources):
        return False
    set_envoy_resources(cluster, parameters, resources)
    annotations = gateway_annotations(cluster, parameters)
    value = f"{applied_text(resources)} at {time.time():.3f}"  # a new value, so the Gateway is updated
    _patch_gateway(cluster, parameters, [_add_annotation(annotations, APPLIED, value)])
    wait_sized(cluster, parameters.envoy, resources, timeout_s)
    return True


def size(
    cluster: Cluster,
    parameters: Parameters,
    sized: dict[str, Any],
    run_id: str,
    save: Callable[[], None],
    timeout_s: float,
) -> None:
    """Give a provisioned Envoy `sized` through its ContourDeployment, the Gateway annotated with the run and the
    change recorded (`save`) before it is made; returns once the provisioner has rolled it out."""
    if not parameters.marked:
        parameters.marked = True
        save()
        mark_changed(cluster, parameters, run_id)
    if not parameters.changed:
        parameters.changed = True
        save()
    apply_envoy_resources(cluster, parameters, sized, timeout_s)


def wait_sized(cluster: Cluster, envoy: Workload, resources: dict[str, Any] | None, timeout_s: float) -> None:
    """Block until the provisioner has written `resources` into Envoy's pod template, then until the rollout
    is done; PlatformError naming what is stuck."""
    deadline = time.monotonic() + timeout_s
    while not _template_sized(cluster, envoy, resources):
        if time.monotonic() > deadline:
            now = workloads.get_resources(cluster, envoy)
            raise PlatformError(
                f"the gateway provisioner has not given {envoy} the resources asked ({applied_text(resources)}) "
                f"after {timeout_s:.0f} s; its template has {applied_text(now)}",
                "check the log of the gateway provisioner (its Deployment contour-gateway-provisioner)",
            )
        time.sleep(POLL_S)
    workloads.wait_rolled_out(cluster, envoy, max(1.0, deadline - time.monotonic()))


def _template_sized(cluster: Cluster, envoy: Workload, resources: dict[str, Any] | None) -> bool:
    return same_resources(workloads.get_resources(cluster, envoy), resources)


def same_resources(found: dict[str, Any] | None, wanted: dict[str, Any] | None) -> bool:
    """Container resources equal as quantities ("0.25" and "250m", "256Mi" and "268435456")."""

    def parsed(resources: dict[str, Any] | None) -> dict[tuple[str, str], float]:
        values: dict[tuple[str, str], float] = {}
        for kind in ("limits", "requests"):
            for name, quantity in ((resources or {}).get(kind) or {}).items():
                parse = parse_cpu if name == "cpu" else parse_memory
                values[(kind, name)] = float(parse(str(quantity)))
        return values

    return parsed(found) == parsed(wanted)


def add_listeners(
    cluster: Cluster, parameters: Parameters, listeners: list[dict[str, Any]], save: Callable[[], None]
) -> None:
    """Add listeners to the Gateway (the TLS profiles' HTTPS listeners), each recorded (`save`) before the patch
    that adds it; one already there (a resumed run's) is left as it is."""
    found = _read_gateway(cluster, parameters)
    present = {listener.get("name") for listener in (found.get("spec") or {}).get("listeners") or []}
    new = [listener for listener in listeners if listener["name"] not in present]
    if not new:
        return
    parameters.listeners += [listener["name"] for listener in new if listener["name"] not in parameters.listeners]
    save()
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": found["metadata"]["uid"]}]
    patch += [{"op": "add", "path": "/spec/listeners/-", "value": listener} for listener in new]
    _patch_gateway(cluster, parameters, patch)


def _read_gateway(cluster: Cluster, parameters: Parameters) -> dict[str, Any]:
    found: Any = gateway_api(cluster, f"read {parameters.gateway}", "gateways", parameters.gateway_namespace,
                             parameters.gateway_name)  # fmt: skip
    return dict(found)


def listener_status(cluster: Cluster, parameters: Parameters) -> dict[str, str]:
    """Each listener of the Gateway's status: "" once Contour has programmed it and resolved its references,
    else the first condition that is not True."""
    found: dict[str, str] = {}
    for listener in (_read_gateway(cluster, parameters).get("status") or {}).get("listeners") or []:
        conditions = {c.get("type"): c for c in listener.get("conditions") or []}
        problem = ""
        for kind in ("Programmed", "ResolvedRefs"):
            condition = conditions.get(kind)
            if condition is None or condition.get("status") != "True":
                problem = f"{kind} is not True: {(condition or {}).get('message') or 'not reported'}"
                break
        found[str(listener.get("name"))] = problem
    return found


def _remove_listeners(cluster: Cluster, parameters: Parameters) -> list[str]:
    """Take the run's listeners off the Gateway (by name, each index tested); returns their names."""
    listeners = (_read_gateway(cluster, parameters).get("spec") or {}).get("listeners") or []
    indices = [i for i, listener in enumerate(listeners) if listener.get("name") in parameters.listeners]
    patch: list[dict[str, Any]] = []
    for index in reversed(indices):
        name = listeners[index]["name"]
        patch += [{"op": "test", "path": f"/spec/listeners/{index}/name", "value": name},
                  {"op": "remove", "path": f"/spec/listeners/{index}"}]  # fmt: skip
    if patch:
        _patch_gateway(cluster, parameters, patch)
    removed = [listeners[i]["name"] for i in indices]
    parameters.listeners = []
    return removed


def restore(cluster: Cluster, parameters: Parameters, run_id: str) -> list[str]:
    """Put the ContourDeployment's Envoy resources back, take the run's listeners and annotations off the Gateway
    (which has the provisioner reconcile it); one line per thing done. The caller waits with `wait_restored`."""
    done: list[str] = []
    if parameters.listeners:
        removed = _remove_listeners(cluster, parameters)
        if removed:
            done.append(f"removed listener(s) {', '.join(removed)} from {parameters.gateway}")
    if parameters.changed:
        set_envoy_resources(cluster, parameters, parameters.envoy_resources)
        parameters.changed = False
        done.append(f"restored spec.envoy.resources of {parameters}")
    if parameters.marked:
        annotations = gateway_annotations(cluster, parameters)
        patch: list[dict[str, Any]] = []
        if annotations.get(CHANGED_BY) == run_id:
            patch += [{"op": "test", "path": _annotation_path(CHANGED_BY), "value": run_id},
                      {"op": "remove", "path": _annotation_path(CHANGED_BY)}]  # fmt: skip
        if APPLIED in annotations:
            patch.append({"op": "remove", "path": _annotation_path(APPLIED)})
        if patch:
            _patch_gateway(cluster, parameters, patch)
        parameters.marked = False
    return done


def wait_restored(cluster: Cluster, parameters: Parameters, timeout_s: float) -> None:
    """Block until Envoy runs with the ContourDeployment's original resources again."""
    try:
        wait_sized(cluster, parameters.envoy, parameters.envoy_resources, timeout_s)
    except NotFoundError:
        return  # the Gateway and its Envoy were deleted meanwhile: nothing runs with the run's resources

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
refused: resizing it would resize their Envoys at their next reconcile; so is one that another GatewayClass
names too, and a class not Accepted, on Gateway API CRDs before v1 (gateway_class.py); a Gateway created in the
class during a live run stops it (class_gateways.py). What the run changes is recorded in the run directory before
the change (`Parameters`, originals.py), and undone on every exit and by `restore`: the ContourDeployment's
original resources go back, the annotations come off and every Gateway it sizes is updated (a reconcile of each),
and the run waits until Envoy runs with its own resources again.

Traffic reaches the backend through an HTTPRoute the run creates (httproute.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes import class_gateways, workloads
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.findings import settle
from runner.platforms.kubernetes.gateway_class import class_checks, no_parameters, refuse_without_v1, shared_checks
from runner.platforms.kubernetes.gateway_object import (
    APPLIED,
    add_annotation,
    gateway_annotations,
    gateway_api,
    json_patch,
    mark_changed,
    patch_gateway,
    remove_listeners,
    touch,
    unmark,
)
from runner.platforms.kubernetes.workloads import Workload
from runner.quantities import parse_cpu, parse_memory
from runner.scenario import Scenario

PARAMETERS = ("projectcontour.io", "v1alpha1", "contourdeployments")
PARAMETERS_KIND = "ContourDeployment"
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
    envoy_section: bool = True  # the ContourDeployment had a spec.envoy before the run (restore removes one it added)
    changed: bool = False
    marked: bool = False
    listeners: list[str] = field(default_factory=list)  # the run's HTTPS listeners on the Gateway (TLS profiles)

    @property
    def gateway(self) -> str:
        return f"Gateway {self.gateway_namespace}/{self.gateway_name}"

    def __str__(self) -> str:
        return f"{PARAMETERS_KIND} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class GatewayClassOf:
    """A Gateway of Contour's gateway provisioner as found: its class's name and controller, and the
    ContourDeployment the class names (its namespace and name)."""

    gateway: str  # "Gateway <namespace>/<name>"
    class_name: str
    controller: str
    parameters_namespace: str
    parameters_name: str


def class_of(cluster: Cluster, scenario: Scenario) -> GatewayClassOf:
    """The scenario's Gateway's class, checked to be Contour's gateway provisioner's and to name a ContourDeployment;
    UsageError (one line naming the fix) for a Gateway that is missing, of another controller's class, or of a
    class without a ContourDeployment, not Accepted, or on Gateway API CRDs before v1 (gateway_class.py)."""
    refuse_without_v1(cluster)  # before v1 is read: a cluster that serves v1beta1 only answers v1 with 404
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
        raise no_parameters(cluster, scenario, class_name)
    settle(class_checks(gateway, gateway_class, (str(params["namespace"]), str(params["name"]))))
    return GatewayClassOf(what, class_name, str(controller), str(params["namespace"]), str(params["name"]))


def find(cluster: Cluster, scenario: Scenario) -> Parameters:
    """The scenario's Gateway, checked to be provisioned by Contour's gateway provisioner alone in its class
    (class_of), and the ContourDeployment that sizes its Envoy, with Envoy's resources as they are now. UsageError
    (one line naming the fix) for a class shared with other Gateways, a ContourDeployment other classes name too,
    or a Gateway whose Envoy the provisioner has not made."""
    ref = scenario.kubernetes.gateway
    found = class_of(cluster, scenario)
    what, class_name = found.gateway, found.class_name
    where = (found.parameters_namespace, found.parameters_name)
    settle(shared_checks(cluster, what, class_name, where))
    others = class_gateways.others(cluster, where, (ref.namespace, ref.name))  # of its class alone: no other names it
    if others:
        raise UsageError(
            f"GatewayClass {class_name} also provisions Gateway(s) {', '.join(map(str, others))}: its "
            f"{PARAMETERS_KIND} sizes their Envoys too",
            f"give {what} a GatewayClass and {PARAMETERS_KIND} of its own",
        )
    parameters = Parameters(
        found.parameters_namespace, found.parameters_name, ref.namespace, ref.name,
        provisioned_envoy(cluster, scenario, what),
    )  # fmt: skip
    try:
        record_original(cluster, parameters)
    except NotFoundError:
        raise UsageError(f"{parameters}, named by GatewayClass {class_name}, does not exist", "create it") from None
    return parameters


def record_original(cluster: Cluster, parameters: Parameters) -> None:
    """Read the ContourDeployment's Envoy settings as they are now into `parameters` (again once the gateway's
    Lease is held, so that no other run's change is taken for the original)."""
    spec = read_parameters(cluster, parameters).get("spec") or {}
    parameters.envoy_section = "envoy" in spec
    parameters.envoy_resources = (spec.get("envoy") or {}).get("resources") or None


def provisioned_envoy(cluster: Cluster, scenario: Scenario, gateway: str) -> Workload:
    ref = scenario.envoy.workload
    try:
        envoy = workloads.find(cluster, ref, "envoy")
    except UsageError as error:
        if "has no container" in str(error):
            raise
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


def read_parameters(cluster: Cluster, parameters: Parameters) -> dict[str, Any]:
    group, version, plural = PARAMETERS
    found: Any = call(f"read {parameters}", cluster.custom.get_namespaced_custom_object, group, version,
                      parameters.namespace, plural, parameters.name)  # fmt: skip
    return dict(found)


def envoy_resources(cluster: Cluster, parameters: Parameters) -> dict[str, Any] | None:
    """The ContourDeployment's `spec.envoy.resources` (None when unset or empty)."""
    envoy = (read_parameters(cluster, parameters).get("spec") or {}).get("envoy") or {}
    return envoy.get("resources") or None


def set_envoy_resources(
    cluster: Cluster, parameters: Parameters, resources: dict[str, Any] | None, *, restoring: bool = False
) -> None:
    """Replace the ContourDeployment's `spec.envoy.resources` (None removes them), in one JSON patch that
    fails when the object was replaced meanwhile; `restoring` a ContourDeployment that had no `spec.envoy`
    removes the one left empty."""
    found = read_parameters(cluster, parameters)
    metadata, spec = found["metadata"], found.get("spec")
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": metadata["uid"]}]
    envoy = (spec or {}).get("envoy")
    if restoring and not parameters.envoy_section and envoy is not None and set(envoy) <= {"resources"}:
        patch.append({"op": "remove", "path": "/spec/envoy"})
        json_patch(cluster, f"patch {parameters}", (*PARAMETERS, parameters.namespace, parameters.name), patch)
        return
    if spec is None:
        patch.append({"op": "add", "path": "/spec", "value": {}})
    if (spec or {}).get("envoy") is None:
        patch.append({"op": "add", "path": "/spec/envoy", "value": {}})
    if resources:
        patch.append({"op": "add", "path": "/spec/envoy/resources", "value": resources})
    elif ((spec or {}).get("envoy") or {}).get("resources") is not None:
        patch.append({"op": "remove", "path": "/spec/envoy/resources"})
    json_patch(cluster, f"patch {parameters}", (*PARAMETERS, parameters.namespace, parameters.name), patch)


def mark(cluster: Cluster, parameters: Parameters, run_id: str, save: Callable[[], None]) -> None:
    """Annotate the Gateway with the run before its first change, the intent recorded (`save`) first."""
    if parameters.marked:
        return
    parameters.marked = True
    save()
    mark_changed(cluster, parameters, run_id)


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

    def annotate() -> None:
        value = f"{applied_text(resources)} at {time.time():.3f}"  # a new value, so the Gateway is updated
        patch_gateway(cluster, parameters, [add_annotation(gateway_annotations(cluster, parameters), APPLIED, value)])

    annotate()
    wait_sized(cluster, parameters.envoy, resources, timeout_s, nudge=annotate)
    return True


def size(
    cluster: Cluster,
    parameters: Parameters,
    sized: dict[str, Any],
    run_id: str,
    save: Callable[[], None],
    timeout_s: float,
) -> bool:
    """Give a provisioned Envoy `sized` through its ContourDeployment, the Gateway annotated with the run and the
    change recorded (`save`) before it is made; returns once the provisioner has rolled it out (True), or at once
    when Envoy had them already (False)."""
    mark(cluster, parameters, run_id, save)
    if not parameters.changed:
        parameters.changed = True
        save()
    return apply_envoy_resources(cluster, parameters, sized, timeout_s)


NUDGE_S = 10.0  # a template that still lags this long after a change: the Gateway is updated again


def wait_sized(
    cluster: Cluster,
    envoy: Workload,
    resources: dict[str, Any] | None,
    timeout_s: float,
    nudge: Callable[[], None] | None = None,
) -> None:
    """Block until the provisioner has written `resources` into Envoy's pod template, then until the rollout
    is done; PlatformError naming what is stuck. The provisioner reads the ContourDeployment from its cache, so
    the reconcile an update of the Gateway starts may still see the old one: every NUDGE_S the template lags,
    `nudge` updates the Gateway again."""
    deadline = time.monotonic() + timeout_s
    nudged = time.monotonic()
    while not _template_sized(cluster, envoy, resources):
        if nudge is not None and time.monotonic() - nudged > NUDGE_S:
            nudge()
            nudged = time.monotonic()
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


def restore(cluster: Cluster, parameters: Parameters, run_id: str, *, wait: bool = True) -> list[str]:
    """Take the run's listeners off the Gateway, put the ContourDeployment's Envoy resources back, take the run's
    annotations off the Gateway and update every Gateway the ContourDeployment sizes, the run's and any created
    meanwhile (which has the provisioner render their Envoy again from it); one line per thing done. Each step goes
    on when its object is gone. With `wait`, `changed` stays set until `wait_restored` has seen Envoy run with
    its own resources again, so a restore that fails there is done again by the next."""
    done: list[str] = []
    restored = False
    if parameters.listeners:
        try:
            removed = remove_listeners(cluster, parameters)
        except NotFoundError:
            removed, parameters.listeners = [], []
            done.append(f"{parameters.gateway} no longer exists (nor its listeners)")
        if removed:
            done.append(f"removed listener(s) {', '.join(removed)} from {parameters.gateway}")
    if parameters.changed:
        try:
            set_envoy_resources(cluster, parameters, parameters.envoy_resources, restoring=True)
            done.append(f"restored spec.envoy.resources of {parameters}")
            restored = True
        except NotFoundError:
            parameters.changed = False
            done.append(f"{parameters} no longer exists")
        parameters.changed = parameters.changed and wait
    if parameters.marked:
        with contextlib.suppress(NotFoundError):  # the Gateway is gone, and its annotations with it
            unmark(cluster, parameters, run_id)
        parameters.marked = False
    if restored:
        done += class_gateways.nudge(cluster, parameters)
    return done


def wait_restored(cluster: Cluster, parameters: Parameters, timeout_s: float) -> None:
    """Block until Envoy runs with the ContourDeployment's original resources again (updating the Gateway again
    while its template lags), then update every Gateway it sizes once more: the provisioner, which reads it from
    its cache, has the restored one now, so none of their Envoys keeps the run's sizing. Then the change counts as
    undone."""
    with contextlib.suppress(NotFoundError):  # the Gateway and its Envoy deleted: nothing runs with the run's resources
        wait_sized(cluster, parameters.envoy, parameters.envoy_resources, timeout_s,
                   nudge=lambda: touch(cluster, parameters))  # fmt: skip
    class_gateways.nudge(cluster, parameters)  # restore said which
    parameters.changed = False


UNPROVISION_TIMEOUT_S = 120.0  # for the provisioner to delete what it made for a deleted Gateway


def wait_unprovisioned(
    cluster: Cluster, namespace: str, gateway: str, timeout_s: float = UNPROVISION_TIMEOUT_S
) -> None:
    """Return once the Gateway `namespace/gateway` is gone and the provisioner has deleted the Contour and Envoy it
    made for it (labelled OWNER_LABEL): it deletes them only while the Gateway's class still exists, so a class
    deleted earlier would leave them running. PlatformError naming what is left after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    selector = f"{OWNER_LABEL}={gateway}"
    while True:
        left = []
        with contextlib.suppress(NotFoundError):
            gateway_api(cluster, f"read Gateway {namespace}/{gateway}", "gateways", namespace, gateway)
            left.append(f"Gateway {namespace}/{gateway}")
        listers = {
            "Deployment": cluster.apps.list_namespaced_deployment,
            "DaemonSet": cluster.apps.list_namespaced_daemon_set,
        }
        for kind, lister in listers.items():
            found: Any = call(f"list {kind}s in {namespace}", lister, namespace, label_selector=selector)
            left += [f"{kind} {namespace}/{o.metadata.name}" for o in found.items]
        if not left:
            return
        if time.monotonic() > deadline:
            raise PlatformError(
                f"the gateway provisioner has not removed {', '.join(left)} {timeout_s:.0f} s after its Gateway was "
                "deleted",
                "check the provisioner's log; delete them by hand if it is gone",
            )
        time.sleep(POLL_S)

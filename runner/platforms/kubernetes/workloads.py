"""The gateway's workloads: find them, patch a container's resources and args, wait for rollouts, scale."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.quantities import format_cpu, format_memory, parse_cpu, parse_memory
from runner.scenario import WorkloadRef

Kind = Literal["DaemonSet", "Deployment"]
# How often a rollout is read (the workload and its pods: two GETs); a rollout the sweep waits for ends on the
# half-second instead of the second.
POLL_S = 0.5
# A requests-only value used when Guaranteed QoS is turned off: the scheduler still has to fit the pod.
BURSTABLE_REQUEST_CPU = "100m"
# The least a sidecar (Contour's shutdown-manager) gets as its limit in a Guaranteed pod: its preStop hook
# execs the contour binary, which thrashed for minutes (and the rollout with it) under a 16Mi limit.
SIDECAR_MINIMUM = {"cpu": "50m", "memory": "64Mi"}
CONCURRENCY_FLAG = "--concurrency"  # Envoy's worker threads
# On a workload a run has changed, until its originals are back: the run's id (see originals.py).
CHANGED_BY = "gateway-sizer/changed-by"
_CHANGED_BY_PATH = "/metadata/annotations/" + CHANGED_BY.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Workload:
    """A DaemonSet or Deployment and the container in it that the sweep sizes."""

    kind: Kind
    namespace: str
    name: str
    container: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _reader(cluster: Cluster, kind: Kind):
    return cluster.apps.read_namespaced_daemon_set if kind == "DaemonSet" else cluster.apps.read_namespaced_deployment


def read(cluster: Cluster, workload: Workload) -> Any:
    return call(f"read {workload}", _reader(cluster, workload.kind), workload.name, workload.namespace)


def find(cluster: Cluster, ref: WorkloadRef, role: str) -> Workload:
    """The workload `ref` names (DaemonSet first when the kind is `auto`); UsageError when absent."""
    kinds: list[Kind] = ["DaemonSet", "Deployment"] if ref.kind == "auto" else [ref.kind]
    for kind in kinds:
        try:
            obj = call(f"read {kind} {ref.namespace}/{ref.name}", _reader(cluster, kind), ref.name, ref.namespace)
        except NotFoundError:
            continue
        names = [c.name for c in obj.spec.template.spec.containers]
        if ref.container not in names:
            raise UsageError(
                f"{kind} {ref.namespace}/{ref.name} has no container {ref.container!r} (it has {', '.join(names)})",
                f"set {role}.workload.container in the scenario",
            )
        return Workload(kind, ref.namespace, ref.name, ref.container)
    raise UsageError(
        f"no {' or '.join(kinds)} {ref.namespace}/{ref.name} found for the {role}",
        f"install it, or point {role}.workload (namespace, name, kind) in the scenario at yours",
    )


def _pod_containers(obj: Any) -> list[tuple[str, Any]]:
    """(JSON-patch path, container) for every init container and container of the pod template."""
    spec = obj.spec.template.spec
    found = [(f"/spec/template/spec/initContainers/{i}", c) for i, c in enumerate(spec.init_containers or [])]
    return found + [(f"/spec/template/spec/containers/{i}", c) for i, c in enumerate(spec.containers)]


def _container(obj: Any, container: str) -> tuple[str, Any]:
    """The named (init) container of the pod template and its JSON-patch path."""
    for path, candidate in _pod_containers(obj):
        if candidate.name == container:
            return path, candidate
    raise PlatformError(f"container {container!r} disappeared from {obj.metadata.namespace}/{obj.metadata.name}")


def image_of(cluster: Cluster, workload: Workload | None) -> str | None:
    """The image of the workload's sized container (None without a workload)."""
    if workload is None:
        return None
    return str(_container(read(cluster, workload), workload.container)[1].image)


def init_container_names(cluster: Cluster, workload: Workload) -> set[str]:
    return {c.name for c in read(cluster, workload).spec.template.spec.init_containers or []}


def get_resources(cluster: Cluster, workload: Workload) -> dict[str, Any] | None:
    """The sized container's `resources`, as the API serves them (None when unset)."""
    return get_pod_resources(cluster, workload)[workload.container]


def get_pod_resources(cluster: Cluster, workload: Workload) -> dict[str, dict[str, Any] | None]:
    """Every container's `resources` in the pod template, init containers included, by container name
    (a pod is Guaranteed only when its init containers are too)."""
    obj = read(cluster, workload)
    found: dict[str, dict[str, Any] | None] = {}
    for _path, container in _pod_containers(obj):
        data = cluster.api.sanitize_for_serialization(container.resources) if container.resources else None
        found[container.name] = data or None
    return found


def set_resources(cluster: Cluster, workload: Workload, resources: dict[str, Any] | None) -> None:
    """Replace the sized container's `resources` exactly."""
    set_pod_resources(cluster, workload, {workload.container: resources})


def set_pod_resources(
    cluster: Cluster,
    workload: Workload,
    resources: dict[str, dict[str, Any] | None],
    args: dict[str, list[str] | None] | None = None,
    *,
    replicas: int | None = None,
) -> None:
    """Replace the named containers' `resources` (and, for those in `args`, their args; None removes
    them) exactly, and a Deployment's `replicas` when given, in one JSON patch: one rollout."""
    obj = read(cluster, workload)
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": obj.metadata.uid}]
    for name, sized in resources.items():
        patch.append({"op": "add", "path": f"{_container(obj, name)[0]}/resources", "value": sized or {}})
    for name, argv in (args or {}).items():
        path, container = _container(obj, name)
        if argv is not None:
            patch.append({"op": "add", "path": f"{path}/args", "value": list(argv)})
        elif container.args is not None:
            patch.append({"op": "remove", "path": f"{path}/args"})
    if replicas is not None:
        patch.append({"op": "add", "path": "/spec/replicas", "value": replicas})
    call(f"patch {workload}", _patcher(cluster, workload.kind), workload.name, workload.namespace, patch)


def _patcher(cluster: Cluster, kind: Kind):
    return cluster.apps.patch_namespaced_daemon_set if kind == "DaemonSet" else cluster.apps.patch_namespaced_deployment


def changed_by(cluster: Cluster, workload: Workload) -> str | None:
    """The run whose changes the workload still carries (its changed-by annotation), if any."""
    return (read(cluster, workload).metadata.annotations or {}).get(CHANGED_BY)


def refuse_foreign_changes(workload: object, holder: str | None, run_id: str) -> None:
    """UsageError (one line) when another run's changes are still on the workload (or Gateway)."""
    if holder is not None and holder != run_id:
        raise UsageError(
            f"{workload} still carries changes of run {holder} that were never restored",
            f"run `gateway-sizer restore {holder}` first",
        )


def mark_changed(cluster: Cluster, workload: Workload, run_id: str) -> None:
    """Annotate the workload as changed by `run_id` (before the change is made); UsageError when it
    carries another run's changes."""
    obj = read(cluster, workload)
    annotations = obj.metadata.annotations or {}
    refuse_foreign_changes(workload, annotations.get(CHANGED_BY), run_id)
    if annotations.get(CHANGED_BY) == run_id:
        return
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": obj.metadata.uid}]
    if obj.metadata.annotations is None:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {CHANGED_BY: run_id}})
    else:
        patch.append({"op": "add", "path": _CHANGED_BY_PATH, "value": run_id})
    call(f"annotate {workload}", _patcher(cluster, workload.kind), workload.name, workload.namespace, patch)


def unmark_changed(cluster: Cluster, workload: Workload, run_id: str) -> None:
    """Remove the changed-by annotation if it names `run_id` (its originals are back)."""
    if changed_by(cluster, workload) != run_id:
        return
    patch = [{"op": "test", "path": _CHANGED_BY_PATH, "value": run_id}, {"op": "remove", "path": _CHANGED_BY_PATH}]
    call(f"annotate {workload}", _patcher(cluster, workload.kind), workload.name, workload.namespace, patch)


def get_args(cluster: Cluster, workload: Workload) -> list[str] | None:
    """The sized container's args (None when it has none)."""
    args = _container(read(cluster, workload), workload.container)[1].args
    return list(args) if args else None


def _split_concurrency(args: list[str] | None) -> tuple[list[str], list[str]]:
    """Envoy's args without `--concurrency` (given as two args, as `--concurrency=N`, or as one arg with
    a space, as Contour writes its flags), and the values given to it, in order."""
    kept: list[str] = []
    values: list[str] = []
    items = iter(args or [])
    for arg in items:
        if arg == CONCURRENCY_FLAG:
            values.append(next(items, ""))
        elif arg.startswith((f"{CONCURRENCY_FLAG}=", f"{CONCURRENCY_FLAG} ")):
            values.append(arg[len(CONCURRENCY_FLAG) + 1 :])
        else:
            kept.append(arg)
    return kept, values


def without_concurrency(args: list[str] | None) -> list[str]:
    """Envoy's args with no worker-thread count: Envoy then starts one worker per CPU of the node."""
    return _split_concurrency(args)[0]


def with_concurrency(args: list[str] | None, workers: int) -> list[str]:
    """Envoy's args with its worker-thread count set to `workers`, replacing any `--concurrency` given
    before. Without the flag Envoy starts one worker per core of the node, whatever the pod's CPU limit."""
    return [*_split_concurrency(args)[0], CONCURRENCY_FLAG, str(workers)]


def concurrency_in(args: list[str] | None) -> int | None:
    """The worker-thread count Envoy's args set (the last `--concurrency` wins), or None."""
    values = _split_concurrency(args)[1]
    last = values[-1].strip() if values else ""
    return int(last) if last.isdigit() else None


def resources_for(cpu_cores: float | None, memory_bytes: int | None, *, guaranteed: bool = True) -> dict[str, Any]:
    """Container resources for a limit: requests equal limits (Guaranteed QoS) unless told otherwise."""
    limits: dict[str, str] = {}
    if cpu_cores is not None:
        limits["cpu"] = format_cpu(cpu_cores)
    if memory_bytes is not None:
        limits["memory"] = format_memory(memory_bytes)
    requests = dict(limits) if guaranteed else {"cpu": BURSTABLE_REQUEST_CPU}
    return {"limits": limits, "requests": requests} if limits else {}


def guaranteed(resources: dict[str, Any] | None) -> dict[str, Any]:
    """A sidecar's resources with limits equal to its requests (or limits, when it has no requests), at
    least SIDECAR_MINIMUM, so the whole pod gets Guaranteed QoS without starving the sidecar."""
    resources = resources or {}
    amounts = {**SIDECAR_MINIMUM, **resources.get("limits", {}), **resources.get("requests", {})}
    cpu = max(parse_cpu(amounts["cpu"]), parse_cpu(SIDECAR_MINIMUM["cpu"]))
    memory = max(parse_memory(amounts["memory"]), parse_memory(SIDECAR_MINIMUM["memory"]))
    chosen = {"cpu": format_cpu(cpu), "memory": format_memory(memory)}
    return {"limits": dict(chosen), "requests": dict(chosen)}


def rolled_out(obj: Any, kind: Kind) -> bool:
    """Whether a DaemonSet or Deployment has finished its rollout (as `kubectl rollout status` judges)."""
    status, generation = obj.status, obj.metadata.generation or 0
    if status is None or (status.observed_generation or 0) < generation:
        return False
    if kind == "DaemonSet":
        desired = status.desired_number_scheduled or 0
        return (
            (status.updated_number_scheduled or 0) >= desired
            and (status.number_available or 0) >= desired
            and (not status.number_unavailable)
        )
    wanted = obj.spec.replicas if obj.spec.replicas is not None else 1
    return (
        (status.updated_replicas or 0) >= wanted
        and (status.replicas or 0) == wanted
        and (status.available_replicas or 0) >= wanted
    )


def wait_rolled_out(cluster: Cluster, workload: Workload, timeout_s: float) -> None:
    """Block until the rollout is done and the pods it replaced are gone (a Deployment's old pod keeps serving its
    clients' connections, with the old limits, while it drains); PlatformError names the stuck pod and its last
    event."""
    deadline = time.monotonic() + timeout_s
    while True:
        obj = read(cluster, workload)
        if rolled_out(obj, workload.kind) and not _terminating(cluster, workload, obj):
            return
        if time.monotonic() > deadline:
            raise PlatformError(
                f"rollout of {workload} not done after {timeout_s:.0f} s: {stuck_pod(cluster, workload, obj)}",
                f"see `kubectl -n {workload.namespace} describe pods`; "
                "raise kubernetes.rollout_timeout_seconds if it is only slow",
            )
        time.sleep(POLL_S)


def _terminating(cluster: Cluster, workload: Workload, obj: Any) -> bool:
    """Whether a pod of the workload is still being deleted."""
    pods = call("list pods", cluster.core.list_namespaced_pod, workload.namespace, label_selector=pod_selector(obj))
    return any(pod.metadata.deletion_timestamp is not None for pod in pods.items)


def pod_name_regex(name: str) -> str:
    """The names of the pods of DaemonSet or Deployment `name`, as a Prometheus regex: `<name>-<5 chars>` or
    `<name>-<pod-template hash>-<5 chars>`, so that `envoy` does not take in the pods of `envoy-gateway-sizer`."""
    return f"{name}-([a-z0-9]{{5}}|[a-z0-9]{{6,10}}-[a-z0-9]{{5}})"


def pod_selector(obj: Any) -> str:
    """A workload's pod selector as a label-selector string."""
    labels = obj.spec.selector.match_labels or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def stuck_pod(cluster: Cluster, workload: Workload, obj: Any) -> str:
    """One line about the first pod of the workload that is not ready: phase, waiting reason, last event."""
    pods = call("list pods", cluster.core.list_namespaced_pod, workload.namespace, label_selector=pod_selector(obj))
    # a pod being replaced (terminating) says less than the new one that does not come up
    for pod in sorted(pods.items, key=lambda p: p.metadata.deletion_timestamp is not None):
        conditions = {c.type: c for c in pod.status.conditions or []}
        ready = conditions.get("Ready")
        if ready is not None and ready.status == "True" and pod.metadata.deletion_timestamp is None:
            continue
        detail = pod.status.phase or "Unknown"
        waiting = [s.state.waiting for s in (pod.status.container_statuses or []) if s.state and s.state.waiting]
        if waiting:
            detail += f", {waiting[0].reason}: {waiting[0].message or ''}".rstrip(": ")
        scheduled = conditions.get("PodScheduled")
        if scheduled is not None and scheduled.status == "False":
            detail += f", {scheduled.reason}: {scheduled.message}"
        events = call(
            "list events",
            cluster.core.list_namespaced_event,
            workload.namespace,
            field_selector=f"involvedObject.name={pod.metadata.name}",
        )
        if events.items:
            last = max(events.items, key=_event_time)
            told = str(scheduled.message or "") if scheduled is not None and scheduled.status == "False" else ""
            event = str(last.message or "")
            said = bool(told and event) and (told in event or event in told)
            detail += f"; last event {last.reason}" + ("" if said else f": {last.message}")  # no message twice
        return f"pod {pod.metadata.name} {detail}"
    return "no pod of it is failing, but its status is not updated (is the controller-manager running?)"


def pod_qos_classes(cluster: Cluster, workload: Workload) -> dict[str, str]:
    """The QoS class of each of the workload's pods that is not being deleted, by pod name."""
    obj = read(cluster, workload)
    pods = call("list pods", cluster.core.list_namespaced_pod, workload.namespace, label_selector=pod_selector(obj))
    return {
        str(pod.metadata.name): str(pod.status.qos_class)
        for pod in pods.items
        if pod.metadata.deletion_timestamp is None and pod.status is not None
    }


class _Before(Protocol):
    @property
    def replicas(self) -> int | None: ...


class _Changes(Protocol):
    """What `facts` reads of a run's changes (originals.ClusterChanges, which imports this module)."""

    def original(self, workload: Workload) -> _Before | None: ...


def facts(cluster: Cluster, workload: Workload, changes: _Changes, provisioner: object | None) -> dict[str, Any]:
    """What `recommend` needs of the gateway's shape (runner.model.EnvoyWorkload): its kind as found, the selector
    of its pods, how many it ran (a Deployment: its replicas before the run changed any; a DaemonSet: the nodes it
    is scheduled on, None before its controller counted them), and what provisions it (`provisioner`)."""
    obj = read(cluster, workload)
    selector = obj.spec.selector.match_labels if obj.spec.selector is not None else None
    original = changes.original(workload)
    if workload.kind == "DaemonSet":
        pods = obj.status.desired_number_scheduled if obj.status is not None else None
    else:
        pods = original.replicas if original is not None and original.replicas is not None else obj.spec.replicas
    return {
        "kind": workload.kind,
        "namespace": workload.namespace,
        "name": workload.name,
        "container": workload.container,
        "selector": dict(selector or {}),
        "pods": pods,
        "provisioned_by": str(provisioner) if provisioner is not None else None,
    }


def replicas(cluster: Cluster, workload: Workload) -> int:
    return int(read(cluster, workload).spec.replicas or 0)


def scale(cluster: Cluster, workload: Workload, count: int) -> None:
    """Set a Deployment's replicas through its scale subresource."""
    if workload.kind != "Deployment":
        raise UsageError(f"{workload} cannot be scaled: only a Deployment backend can")
    call(
        f"scale {workload}",
        cluster.apps.patch_namespaced_deployment_scale,
        workload.name,
        workload.namespace,
        {"spec": {"replicas": count}},
    )


def _event_time(event: Any) -> datetime:
    """When an event last happened (events carry one of three timestamps)."""
    moment = event.last_timestamp or event.event_time or event.metadata.creation_timestamp
    return moment if isinstance(moment, datetime) else datetime.min.replace(tzinfo=UTC)

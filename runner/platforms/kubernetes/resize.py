"""In-place pod resize: new CPU and memory limits for the running Envoy pods, no rollout.

A sweep in interleaved rounds visits each configuration once per round; rolling Envoy out at every visit would
cost a rollout (and a cold Envoy) each time. Kubernetes 1.33 and later resize a running container through the
pod's `resize` subresource: the kubelet rewrites its cgroup, the container keeps running. The workload's own
template keeps the run's first patch; the pods carry the configuration measured, and the run checks on the
pods that the kubelet applied it. A cluster that cannot (an older API server, the feature gate off, a kubelet
or runtime that defers or refuses it) is told apart, and the sweep then rolls Envoy out instead.
"""

from __future__ import annotations

import time
from typing import Any

from runner.errors import PlatformError
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.workloads import Workload, get_resources, pod_selector, read
from runner.quantities import parse_cpu, parse_memory

RESIZE_TIMEOUT_S = 60.0
POLL_S = 0.5
PENDING = "PodResizePending"  # a pod condition (1.33+): the kubelet has not applied the resize (Deferred, Infeasible)
IN_PROGRESS = "PodResizeInProgress"


class ResizeUnsupported(PlatformError):
    """The cluster does not resize this pod in place: roll it out instead."""


def live_pods(cluster: Cluster, workload: Workload) -> list[Any]:
    """The workload's pods that are not being deleted."""
    selector = pod_selector(read(cluster, workload))
    pods = call("list pods", cluster.core.list_namespaced_pod, workload.namespace, label_selector=selector)
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


def runs_with(actual: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """Whether the resources a container runs with are the wanted ones (quantities compared by value)."""
    if not actual:
        return False
    for kind in ("limits", "requests"):
        have, want = actual.get(kind) or {}, wanted.get(kind) or {}
        if "cpu" in want and ("cpu" not in have or parse_cpu(have["cpu"]) != parse_cpu(want["cpu"])):
            return False
        if "memory" in want and ("memory" not in have or parse_memory(have["memory"]) != parse_memory(want["memory"])):
            return False
    return True


def running_resources(cluster: Cluster, pod: Any, container: str) -> dict[str, Any] | None:
    """The resources the kubelet reports the container running with (status, not spec)."""
    for status in pod.status.container_statuses or []:
        if status.name == container and status.resources is not None:
            data: dict[str, Any] = cluster.api.sanitize_for_serialization(status.resources)
            return data
    return None


def resize_in_place(cluster: Cluster, workload: Workload, resources: dict[str, Any], timeout_s: float) -> None:
    """Give the container of every pod of `workload` these resources in place and wait until the kubelet
    runs it with them. ResizeUnsupported when the cluster cannot; PlatformError when a pod's resize is
    infeasible or not done in `timeout_s`."""
    body = {"spec": {"containers": [{"name": workload.container, "resources": resources}]}}
    pods = live_pods(cluster, workload)
    for pod in pods:
        name = pod.metadata.name
        try:
            call(f"resize pod {workload.namespace}/{name}", cluster.core.patch_namespaced_pod_resize, name,
                 workload.namespace, body)  # fmt: skip
        except NotFoundError as error:  # no resize subresource: an API server before 1.33, or the gate off
            raise ResizeUnsupported(f"{workload} cannot be resized in place: {error}") from None
        except PlatformError as error:
            if "HTTP 422" in str(error) or "HTTP 405" in str(error):  # refused: a policy, or immutable resources
                raise ResizeUnsupported(f"{workload} cannot be resized in place: {error}") from None
            raise
    deadline = time.monotonic() + timeout_s
    waiting = [p.metadata.name for p in pods]
    while waiting:
        pending: list[str] = []
        for name in waiting:
            pod = call(f"read pod {workload.namespace}/{name}", cluster.core.read_namespaced_pod, name,
                       workload.namespace)  # fmt: skip
            conditions = {c.type: c for c in pod.status.conditions or []}
            stuck = conditions.get(PENDING)
            if stuck is not None and stuck.reason == "Infeasible":
                raise ResizeUnsupported(f"pod {workload.namespace}/{name} cannot be resized: {stuck.message}")
            done = runs_with(running_resources(cluster, pod, workload.container), resources)
            if not done or PENDING in conditions or IN_PROGRESS in conditions:
                pending.append(name)
        waiting = pending
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise PlatformError(
                f"in-place resize of {workload} not done after {timeout_s:.0f} s: pod {waiting[0]}",
                f"see `kubectl -n {workload.namespace} describe pod {waiting[0]}`",
            )
        time.sleep(POLL_S)


def resize_back(cluster: Cluster, workload: Workload, timeout_s: float) -> int:
    """Resize the workload's pods that run with other resources than its template says (a run resized them in
    place) back to the template's, in place; returns how many. Called once the template is restored and rolled
    out: a template the run changed replaced its pods already, one it left as it was still has the pods the run
    resized (and a template with no resources at all was changed by the run: its pods were replaced)."""
    template = get_resources(cluster, workload)
    if not template:
        return 0
    differing = [
        p
        for p in live_pods(cluster, workload)
        if not runs_with(running_resources(cluster, p, workload.container), template)
    ]
    if differing:
        resize_in_place(cluster, workload, template, timeout_s)
    return len(differing)

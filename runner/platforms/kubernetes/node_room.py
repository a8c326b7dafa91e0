"""Whether the node(s) the measured pods run on have room for the largest configuration's pods: allocatable CPU and
memory against the requests of the pods on them (the scheduler's own sum), read before anything is created.

It needs to read nodes and to list pods in every namespace, which the in-cluster runner's least-privilege account
may not: the preflight then says it did not check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.errors import PlatformError, UnreachableError, UsageError
from runner.plan import Plan
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.fleet import EnvoyFleet
from runner.quantities import format_cpu, format_memory, parse_cpu, parse_memory

SIDECAR_CPU = 0.05  # what a sidecar of a Guaranteed pod gets at least (workloads.SIDECAR_MINIMUM)


def _amount(parse: Callable[[str], float], quantity: Any) -> float:
    """A request's quantity as the API serves it, 0 when unset or zero (the project's parsers refuse a zero limit)."""
    try:
        return float(parse(str(quantity))) if quantity else 0.0
    except ValueError:
        return 0.0


def _pod_requests(pod: Any) -> tuple[float, int]:
    """A pod's effective CPU and memory requests: its containers' sum, or its largest init container's."""
    spec = pod.spec

    def amounts(containers: list[Any]) -> list[tuple[float, int]]:
        found = []
        for container in containers or []:
            requests = (container.resources.requests if container.resources else None) or {}
            found.append((_amount(parse_cpu, requests.get("cpu")), int(_amount(parse_memory, requests.get("memory")))))
        return found

    regular = amounts(spec.containers)
    init = amounts(spec.init_containers)
    cpu = max([sum(c for c, _ in regular), *(c for c, _ in init)])
    memory = max([sum(m for _, m in regular), *(m for _, m in init)])
    return cpu, memory


def _largest(fleet: EnvoyFleet, plan: Plan | None) -> tuple[float, int, int]:
    """The CPU and memory one pod of the largest configuration requests, and the most pods (plan or scenario)."""
    envoy = fleet.scenario.envoy
    cpu, memory = max(envoy.cpu_cores), max(envoy.memory_bytes)
    pods = max(envoy.replicas)
    if plan is not None and plan.configurations:
        cpu = max(c.envoy_cpu_cores for c in plan.configurations)
        pods = max(c.envoy_replicas for c in plan.configurations)
    requested = cpu if fleet.guaranteed else parse_cpu(workloads.BURSTABLE_REQUEST_CPU)
    return requested + SIDECAR_CPU, memory + parse_memory(workloads.SIDECAR_MINIMUM["memory"]), pods


def node_room(cluster: Cluster, fleet: EnvoyFleet, production_pods: list[Any], plan: Plan | None) -> str:
    """One line: each node's room against the largest configuration's pods, or why it was not checked."""
    cpu, memory, count = _largest(fleet, plan)
    wanted = f"{count} pod(s) of {format_cpu(cpu)} CPU / {format_memory(memory)} (the largest configuration)"
    placement = fleet.scenario.kubernetes.sizing.node_selector if fleet.sizing else None
    nodes = sorted({p.spec.node_name for p in production_pods if p.spec.node_name})
    try:
        if placement:
            selector = ",".join(f"{k}={v}" for k, v in placement.items())
            nodes = [n.metadata.name for n in call("list nodes", cluster.core.list_node, label_selector=selector).items]
        elif fleet.sizing:
            nodes = nodes[:1]
        room = [(node, *_free(cluster, node, production_pods if not fleet.sizing else [])) for node in nodes]
    except UnreachableError:
        raise
    except (UsageError, PlatformError) as error:  # forbidden (the runner's own account reads no node), or gone
        return f"node room: not checked ({str(error).split(':')[0]}): the run needs {wanted}"
    if not room:
        where = "matches kubernetes.sizing.node_selector" if placement else "runs the production gateway's pods yet"
        return f"node room: not checked (no node {where}): the run needs {wanted}"
    fits = sum(min(int(free_cpu // cpu), int(free_memory // memory)) for _, free_cpu, free_memory in room)
    facts = "; ".join(f"{node} {format_cpu(c)} CPU / {format_memory(int(m))} free" for node, c, m in room)
    verdict = "fits" if fits >= count else f"does NOT fit ({fits} fit): the run would stop at a pod left Pending"
    return f"node room: {facts}; the run needs {wanted}: {verdict}"


def _free(cluster: Cluster, node: str, replaced: list[Any]) -> tuple[float, float]:
    """A node's allocatable CPU and memory less what its pods request (the pods the run replaces not counted)."""
    found = call(f"read node {node}", cluster.core.read_node, node)
    allocatable = found.status.allocatable or {}
    pods = call(
        f"list pods on {node}", cluster.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
    )
    gone = {p.metadata.uid for p in replaced}
    used = [
        _pod_requests(p)
        for p in pods.items
        if str(p.status.phase) not in ("Succeeded", "Failed") and p.metadata.uid not in gone
    ]
    cpu = parse_cpu(allocatable.get("cpu", "0")) - sum(c for c, _ in used)
    memory = parse_memory(allocatable.get("memory", "0")) - sum(m for _, m in used)
    return cpu, float(memory)

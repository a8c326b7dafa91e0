"""`recommend --output yaml`: Kubernetes objects for Contour's Envoy in the shape it runs, as multi-document YAML.

The workload is the install's (runner.report.shape): a Kubernetes run's own, else Contour's quickstart
projectcontour/envoy, a DaemonSet, container envoy, pods labelled app=envoy. Every document is complete enough for
`kubeconform -strict` (the selector a workload's schema requires is the install's own, which a server-side apply
leaves as it is) and is headed by comments with the figures it comes from, the worker threads (`--concurrency`:
Envoy's args are a list that a server-side apply would replace whole, so the flag is named, not set) and, when
the answer was sized at a latency target, where it bound.
- A Deployment: 1. the envoy container's resources (requests = limits), replicas left to 2. an autoscaling/v2
  HorizontalPodAutoscaler on the envoy container's own CPU (a ContainerResource metric: the shutdown-manager
  sidecar does not dilute it), min N+1, max a multiple of it; 3. a policy/v1 PodDisruptionBudget, maxUnavailable
  1: a drain never takes the pool below N.
- A DaemonSet: its envoy container's resources (for the nodes that run it when their count is known), and the
  nodes it needs, N+1, as comments; no HPA and no PDB (runner.report.daemonset says why).
With the memory model (`recommend --connections N --routes R`), the memory limit comes from its fits and the
header gives the overload-manager flags for Contour's `contour bootstrap` (the envoy-initconfig init container's
args, written as comments for the same reason); `memory_manifest` writes just the memory limit when no target
RPS is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from runner.quantities import format_cpu, format_memory
from runner.report.daemonset import NO_AUTOSCALER, NodesPlan
from runner.report.memory_sizing import MemoryRecommendation
from runner.report.replicas import MAX_REPLICAS_FACTOR, ReplicaPlan
from runner.report.shape import Gateway
from runner.report.threads import Threads

__all__ = ["FIELD_MANAGER", "envoy_manifests", "memory_manifest"]

FIELD_MANAGER = "gateway-sizer"


def _resources(cores: float, memory_bytes: int | None) -> dict[str, dict[str, str]]:
    """requests = limits (Guaranteed QoS, as the sweep measured): the HPA's utilization is then of the limit."""
    values = {"cpu": format_cpu(cores)}
    if memory_bytes is not None:
        values["memory"] = format_memory(memory_bytes)
    return {"requests": dict(values), "limits": dict(values)}


def _workload(resources: dict[str, dict[str, str]], gw: Gateway) -> dict[str, Any]:
    """The envoy container's resources in the install's workload, with its own selector (the schema requires one)."""
    return {
        "apiVersion": "apps/v1",
        "kind": gw.kind,
        "metadata": {"name": gw.name, "namespace": gw.namespace},
        "spec": {
            "selector": {"matchLabels": dict(gw.labels)},
            "template": {"spec": {"containers": [{"name": gw.container, "resources": resources}]}},
        },
    }


def _memory_lines(memory: MemoryRecommendation) -> list[str]:
    """The memory model's sizing and the overload flags, as header comments."""
    overload = memory.overload
    return [
        f"memory: {memory.memory} for {memory.connections:,} held connections and {memory.routes:,} routes per pod "
        f"(working set {memory.predicted_bytes / 2**20:,.1f} MiB by the fits, +{memory.headroom:.0%})",
        f"memory fits: {memory.fits.describe_connections()}; {memory.fits.describe_routes()}",
        f"overload manager for {memory.memory}: add to the envoy-initconfig init container's args "
        f"(contour bootstrap): {' '.join(overload.contour_flags())}",
        *(f"warning: {w}" for w in memory.warnings),
    ]


def _hpa(plan: ReplicaPlan, gw: Gateway) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": gw.name, "namespace": gw.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": gw.name},
            "minReplicas": plan.min_replicas,
            "maxReplicas": plan.max_replicas,
            "metrics": [
                {
                    "type": "ContainerResource",
                    "containerResource": {
                        "name": "cpu",
                        "container": gw.container,
                        "target": {"type": "Utilization", "averageUtilization": plan.hpa_target_pct},
                    },
                }
            ],
        },
    }


def _pdb(gw: Gateway) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": gw.name, "namespace": gw.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(gw.labels)}},
    }


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def memory_manifest(memory: MemoryRecommendation, gw: Gateway, run_id: str) -> str:
    """The envoy container's memory limit (requests = limits) from the memory model, with the overload flags."""
    header = [
        f"gateway-sizer recommend: Envoy memory, run {run_id}",
        gw.describe,
        *_memory_lines(memory),
        "",
        f"apply: kubectl apply --server-side --field-manager={FIELD_MANAGER} -f <this file>",
    ]
    size = format_memory(memory.memory_bytes)
    resources = {"requests": {"memory": size}, "limits": {"memory": size}}
    return _comment(header) + yaml.safe_dump(_workload(resources, gw), sort_keys=False)


def _threads_lines(threads: Threads | None) -> list[str]:
    if threads is None:
        return []
    setting = (
        f"set {threads.flag} in the envoy container's args for {format_cpu(threads.cores)} per pod"
        if threads.production is not None
        else "set --concurrency to the CPU count of the nodes the run measured on (it did not record it)"
    )
    return [
        f"threads: the figures hold for Envoy with {threads.measured_text}",
        f"  {setting} (not set here: a server-side apply would replace the whole args list)",
    ]


def _header(
    plan: ReplicaPlan | NodesPlan,
    gw: Gateway,
    run_id: str,
    threads: Threads | None,
    latency: Sequence[str],
    memory: MemoryRecommendation | None,
    figures: list[str],
) -> list[str]:
    rec, basis = plan.rec, plan.basis if isinstance(plan, NodesPlan) else plan.rate.basis
    owner = (
        [f"warning: {gw.provisioned_by} provisions this Envoy: set its resources there (spec.envoy), not here"]
        if gw.provisioned_by
        else []
    )
    return [
        f"gateway-sizer recommend: Envoy for {rec.target_rps:,.0f} RPS with {rec.headroom:.0%} headroom, run {run_id}",
        f"sized from {basis.text}",
        gw.describe,
        *owner,
        *_threads_lines(threads),
        *latency,
        f"scale-out: {plan.scale_out.text}",
        *figures,
        *(f"warning: {w}" for w in plan.warnings),
        *(_memory_lines(memory) if memory is not None else []),
        "",
        f"apply: kubectl apply --server-side --field-manager={FIELD_MANAGER} -f <this file>",
        "(add --force-conflicts when Contour's installer owns the envoy container's resources)",
    ]


def _daemonset(
    plan: NodesPlan,
    gw: Gateway,
    run_id: str,
    threads: Threads | None,
    latency: Sequence[str],
    memory: MemoryRecommendation | None,
) -> str:
    figures = [
        f"nodes N = ceil({plan.rec.required_rps:,.0f} / {plan.rate.rps * plan.scale_out.efficiency:,.0f} knee RPS per "
        f"pod at {format_cpu(plan.rate.cores)}) = {plan.nodes}; run it on N+1 = {plan.min_nodes} nodes",
    ]
    on = plan.on_nodes
    if on is not None:
        figures.append(
            f"on {on.nodes} nodes ({on.source}): {on.carrying} pods carry {plan.rec.required_rps:,.0f} RPS, each a "
            f"knee of {on.per_pod.required_rps:,.0f}: {on.per_pod.cpu} per pod"
        )
    header = _header(plan, gw, run_id, threads, latency, memory, figures)
    what = f"for the {on.nodes} nodes that run it" if on is not None else f"at N+1 = {plan.min_nodes} nodes"
    doc = _comment([*header, "", f"the envoy container's resources, {what}"])
    doc += yaml.safe_dump(_workload(_resources(plan.cores_per_pod, plan.memory_bytes), gw), sort_keys=False)
    return doc + _comment(["", f"{NO_AUTOSCALER}."])


def envoy_manifests(
    plan: ReplicaPlan | NodesPlan,
    gw: Gateway,
    run_id: str,
    memory: MemoryRecommendation | None = None,
    threads: Threads | None = None,
    latency: Sequence[str] = (),
) -> str:
    """The multi-document YAML for the install's shape (a NodesPlan for a DaemonSet, a ReplicaPlan for a
    Deployment), each document headed by comments saying where its figures come from; with `memory`, the memory
    limit is the memory model's (plan.rec carries it) and its overload flags are added."""
    if isinstance(plan, NodesPlan) != (gw.kind == "DaemonSet"):
        raise ValueError(f"a {type(plan).__name__} does not size a {gw.kind}")
    if isinstance(plan, NodesPlan):
        return _daemonset(plan, gw, run_id, threads, latency, memory)
    rec = plan.rec
    figures = [
        f"replicas N = ceil({rec.required_rps:,.0f} / {plan.fleet_rate:,.0f} knee RPS per replica) = "
        f"{plan.replicas}; N+1 = {plan.min_replicas}",
        f"HPA target = floor(100 x {plan.threshold:.3g} / ((1 + {rec.headroom:g}) x {plan.scale_out.imbalance:.2f} "
        f"imbalance)) = {plan.hpa_target_pct}% of the CPU request",
    ]
    header = _header(plan, gw, run_id, threads, latency, memory, figures)
    docs = [_comment(header) + _comment(["1. the envoy container's resources (replicas are left to the HPA)"])]
    docs[0] += yaml.safe_dump(_workload(_resources(plan.cores_per_replica, rec.memory_bytes), gw), sort_keys=False)
    docs.append(
        _comment(
            [
                f"2. scale on the envoy container's own CPU: min N+1 = {plan.min_replicas}, "
                f"max {MAX_REPLICAS_FACTOR} x min = {plan.max_replicas}"
            ]
        )
        + yaml.safe_dump(_hpa(plan, gw), sort_keys=False)
    )
    docs.append(
        _comment([f"3. a voluntary disruption (a node drain) takes at most one pod: N = {plan.replicas} stay"])
        + yaml.safe_dump(_pdb(gw), sort_keys=False)
    )
    return "---\n".join(docs)

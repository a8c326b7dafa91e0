"""`recommend --output yaml`: Kubernetes objects for Contour's Envoy from a replica plan, as multi-document YAML.

Three documents, for the gateway's namespace and name (the run's, when it ran on Kubernetes; else Contour's
defaults projectcontour/envoy, container envoy, pods labelled app=envoy):
1. the resources of the Envoy container, as a partial Deployment (or DaemonSet) for server-side apply
   (`kubectl apply --server-side`); replicas are left to the HPA;
2. an autoscaling/v2 HorizontalPodAutoscaler on the envoy container's own CPU (a ContainerResource metric:
   the shutdown-manager sidecar does not dilute it), min N+1, max a multiple of it;
3. a policy/v1 PodDisruptionBudget, maxUnavailable 1: a drain never takes the pool below N.
An HPA cannot scale a DaemonSet (one pod per node, no scale subresource), and a PDB with maxUnavailable needs
one too, so for a DaemonSet only the resources are written, with a comment saying what to do instead.
With the memory model (`recommend --connections N --routes R`), the memory limit comes from its fits and
the header gives the overload-manager flags for Contour's `contour bootstrap` (the envoy-initconfig init
container's args, a list that a server-side apply would replace whole, so they are written as comments);
`memory_manifest` writes just the memory limit when no target RPS is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from runner.errors import UsageError
from runner.model import RunSummary
from runner.quantities import format_cpu, format_memory
from runner.report.memory_sizing import MemoryRecommendation
from runner.report.replicas import MAX_REPLICAS_FACTOR, ReplicaPlan
from runner.scenario import WorkloadRef

__all__ = ["FIELD_MANAGER", "Gateway", "envoy_manifests", "gateway_of_run", "memory_manifest"]

FIELD_MANAGER = "gateway-sizer"
GatewayKind = Literal["Deployment", "DaemonSet"]


class Gateway(BaseModel):
    """Where Contour's Envoy runs: the workload, its container and the labels that select its pods."""

    model_config = ConfigDict(frozen=True)

    namespace: str = "projectcontour"
    name: str = "envoy"
    container: str = "envoy"
    kind: GatewayKind = "Deployment"
    labels: dict[str, str] = {"app": "envoy"}
    source: str = "Contour's defaults"


def gateway_of_run(run_dir: Path, summary: RunSummary) -> Gateway:
    """The Envoy workload a Kubernetes run patched (its scenario.yaml's envoy.workload); Contour's defaults for
    a local run. A kind of `auto` (found at run time, not recorded) becomes Deployment: the HPA needs one."""
    if summary.platform != "kubernetes":
        return Gateway()
    path = run_dir / "scenario.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
        ref = WorkloadRef.model_validate(raw["envoy"]["workload"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        raise UsageError(f"{path}: no readable envoy.workload ({type(error).__name__})", "re-run the sweep") from None
    kind: GatewayKind = "DaemonSet" if ref.kind == "DaemonSet" else "Deployment"
    return Gateway(
        namespace=ref.namespace,
        name=ref.name,
        container=ref.container,
        kind=kind,
        labels={"app": ref.name},
        source=f"run {summary.run_id}'s envoy.workload",
    )


def _resources(plan: ReplicaPlan) -> dict[str, dict[str, str]]:
    """requests = limits (Guaranteed QoS, as the sweep measured): the HPA's utilization is then of the limit."""
    values = {"cpu": format_cpu(plan.cores_per_replica)}
    if plan.rec.memory_bytes is not None:
        values["memory"] = format_memory(plan.rec.memory_bytes)
    return {"requests": dict(values), "limits": dict(values)}


def _workload(resources: dict[str, dict[str, str]], gw: Gateway) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": gw.kind,
        "metadata": {"name": gw.name, "namespace": gw.namespace},
        "spec": {"template": {"spec": {"containers": [{"name": gw.container, "resources": resources}]}}},
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
        f"{gw.kind} {gw.namespace}/{gw.name}, container {gw.container} ({gw.source})",
        *_memory_lines(memory),
        "",
        f"apply: kubectl apply --server-side --field-manager={FIELD_MANAGER} -f <this file>",
    ]
    size = format_memory(memory.memory_bytes)
    resources = {"requests": {"memory": size}, "limits": {"memory": size}}
    return _comment(header) + yaml.safe_dump(_workload(resources, gw), sort_keys=False)


def envoy_manifests(plan: ReplicaPlan, gw: Gateway, run_id: str, memory: MemoryRecommendation | None = None) -> str:
    """The multi-document YAML, each document headed by comments saying where its figures come from; with
    `memory`, the memory limit is the memory model's (plan.rec carries it) and its overload flags are added."""
    rec = plan.rec
    header = [
        f"gateway-sizer recommend: Envoy for {rec.target_rps:,.0f} RPS with {rec.headroom:.0%} headroom, run {run_id}",
        f"sized from {rec.basis.text}",
        f"{gw.kind} {gw.namespace}/{gw.name}, container {gw.container} ({gw.source})",
        f"replicas N = ceil({rec.required_rps:,.0f} / {plan.knee_per_replica:,.0f} knee RPS per replica) = "
        f"{plan.replicas}; N+1 = {plan.min_replicas}",
        f"HPA target = floor(100 x {plan.threshold:g} / (1 + {rec.headroom:g})) = {plan.hpa_target_pct}% of the CPU "
        "request",
        *(f"warning: {w}" for w in (*rec.warnings, *plan.warnings)),
        *(_memory_lines(memory) if memory is not None else []),
        "",
        f"apply: kubectl apply --server-side --field-manager={FIELD_MANAGER} -f <this file>",
        "(add --force-conflicts when Contour's installer owns the envoy container's resources)",
    ]
    docs = [_comment(header) + _comment(["1. the envoy container's resources (replicas are left to the HPA)"])]
    docs[0] += yaml.safe_dump(_workload(_resources(plan), gw), sort_keys=False)
    if gw.kind == "DaemonSet":
        docs[0] += _comment(
            [
                "",
                "No HorizontalPodAutoscaler and no PodDisruptionBudget: Envoy runs as a DaemonSet (one pod per node),",
                "which an HPA cannot scale and a maxUnavailable PDB cannot count (no scale subresource).",
                f"Run Envoy on at least {plan.min_replicas} nodes (N+1), or deploy it as a Deployment to autoscale it.",
            ]
        )
        return docs[0]
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

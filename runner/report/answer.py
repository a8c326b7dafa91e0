"""`recommend --target-rps` in the shape production runs: the figures, then the install's shape with its plan.

1. The rate at each measured CPU limit (runner.report.series), at the latency target when one is given
   (runner.report.slo: the capacity at it where it binds before the CPU threshold), and one pod sized from them
   (runner.report.sizing).
2. The install's shape (runner.report.shape) and the scale-out (runner.report.scale_out): a DaemonSet gets cores
   per pod for the nodes that run it and N+1 nodes (runner.report.daemonset); a Deployment gets replicas, N+1 and
   an HPA (runner.report.replicas).
3. The worker threads the figures hold for and the `--concurrency` to set (runner.report.threads), and where the
   latency target bound, in the text and in the YAML's header (runner.report.manifests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError
from runner.model import RunSummary
from runner.report import read_scenario
from runner.report.daemonset import NodesPlan, format_nodes, plan_nodes
from runner.report.manifests import envoy_manifests
from runner.report.memory_sizing import MemoryRecommendation
from runner.report.replicas import ReplicaPlan, format_replicas, plan_replicas
from runner.report.scale_out import scale_out_of
from runner.report.shape import GatewayKind, gateway_of_run
from runner.report.sizing import format_recommendation, recommend, require_fit
from runner.report.slo import at_slo, latency_lines, meeting_slo, open_loop
from runner.report.threads import threads_for
from runner.scenario.models import LoadSpec

__all__ = ["Request", "answer"]

DEFAULT_SLO_MS = LoadSpec.model_fields["latency_slo_ms"].default


@dataclass(frozen=True)
class Request:
    """What `recommend` was asked: the target and headroom, and the options that shape the answer."""

    target_rps: float
    headroom: float
    cores_per_replica: float | None = None
    nodes: int | None = None
    kind: GatewayKind | None = None
    slo_ms: float | None = None
    profile: str | None = None
    yaml: bool = False


def _run_slo(summary: RunSummary, run_dir: Path) -> tuple[float, str]:
    """The SLO the run judged its capacities at, and where that figure comes from."""
    recorded = {c.capacity.slo_ms for c in summary.configs if c.capacity is not None and c.capacity.slo_ms}
    if len(recorded) == 1:
        return recorded.pop(), "the run's load.latency_slo_ms; --slo-p99-ms sizes for another"
    scenario = read_scenario(run_dir)
    if scenario is not None:
        return scenario.load.latency_slo_ms, "the run's load.latency_slo_ms; --slo-p99-ms sizes for another"
    return DEFAULT_SLO_MS, "the default load.latency_slo_ms; --slo-p99-ms sizes for another"


def answer(
    run_dir: Path,
    summary: RunSummary,
    request: Request,
    memory: MemoryRecommendation | None = None,
) -> str:
    """The text (or YAML) `recommend` prints for a target RPS."""
    gateway = gateway_of_run(run_dir, summary, request.kind)
    if request.nodes is not None and gateway.kind != "DaemonSet":
        raise UsageError(
            f"--nodes sizes a DaemonSet's pods, and {gateway.title} is a Deployment ({gateway.kind_source})",
            "leave out --nodes (replicas are computed), or --workload-kind DaemonSet",
        )
    if request.slo_ms is not None:
        slo_ms, slo_source = request.slo_ms, "--slo-p99-ms"
    else:
        slo_ms, slo_source = _run_slo(summary, run_dir)
    if request.slo_ms is not None or open_loop(summary):  # judged by the capacity's rules of today
        summary = at_slo(summary, slo_ms)
    measured = require_fit(summary, request.profile)
    series = meeting_slo(measured, slo_ms)
    rec = recommend(series, request.target_rps, request.headroom, memory_bytes=memory.memory_bytes if memory else None)
    scale_out = scale_out_of(summary, series)
    plan: ReplicaPlan | NodesPlan
    if gateway.kind == "DaemonSet":
        nodes, source = request.nodes, "--nodes"
        if nodes is None and gateway.pods:
            nodes, source = gateway.pods, f"the {gateway.pods} it ran on in run {summary.run_id}"
        plan = plan_nodes(rec, request.cores_per_replica, nodes, source, scale_out)
        threads = threads_for(plan.basis, plan.cores_per_pod, summary, read_scenario(run_dir))
    else:
        plan = plan_replicas(rec, summary.threshold, request.cores_per_replica, summary, scale_out)
        threads = threads_for(plan.rate.basis, plan.cores_per_replica, summary, read_scenario(run_dir))
    latency = latency_lines([r.config for r in measured.rates], series, slo_ms, summary.threshold, slo_source)
    if request.yaml:
        return envoy_manifests(plan, gateway, summary.run_id, memory, threads, latency)
    lines = [format_recommendation(rec, summary.run_id), *latency, f"Shape: {gateway.describe}"]
    if gateway.provisioned_by:
        lines.append(f"warning: {gateway.provisioned_by} provisions this Envoy: set its resources there (spec.envoy)")
    lines += format_nodes(plan) if isinstance(plan, NodesPlan) else format_replicas(plan)
    return "\n".join([*lines, *threads.lines()]) + "\n"

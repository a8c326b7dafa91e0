"""`recommend` for a DaemonSet: one Envoy pod per node, so the answer is cores per pod and a count of nodes. Pure.

- N+1 nodes at a per-pod limit, chosen as for replicas (runner.report.replicas: the measured limit that runs the
  fewest cores at N+1, or --cores-per-replica): N = ceil(R / (k x E)) nodes, N+1 so that one node lost (drained,
  rebooted, its Envoy rolling) leaves N to carry R = target x (1 + headroom).
- On the M nodes that run it (--nodes, or the pods a Kubernetes run found it running): the cores per pod with
  which M - 1 pods carry R, each pod's knee R / ((M - 1) x E), sized as one pod is (runner.report.sizing). With
  one node there is no N+1, and it says so.
No HorizontalPodAutoscaler (it scales a Deployment's replicas; a DaemonSet has one pod per node) and no
PodDisruptionBudget (one with maxUnavailable needs a scale subresource): the DaemonSet's own rolling update with
maxUnavailable 1 is what keeps N pods up while it rolls.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.report import formatting as fmt
from runner.report.replicas import ReplicaRate, count_pods, rate_warning
from runner.report.scale_out import ASSUMED, ScaleOut
from runner.report.series import Rate
from runner.report.sizing import Recommendation, recommend

__all__ = ["NO_AUTOSCALER", "NodesPlan", "OnNodes", "format_nodes", "plan_nodes"]

NO_AUTOSCALER = (
    "no HorizontalPodAutoscaler and no PodDisruptionBudget: an HPA cannot scale a DaemonSet (one pod per node) "
    "and a maxUnavailable budget needs a scale subresource"
)


@dataclass(frozen=True)
class OnNodes:
    """The pods sized for `nodes` nodes (`source`: who said how many): `carrying` of them (one lost) serve the
    required knee, so each pod's own knee must reach `per_pod.required_rps`."""

    nodes: int
    source: str
    carrying: int
    per_pod: Recommendation


@dataclass(frozen=True)
class NodesPlan:
    """A DaemonSet for `rec.target_rps`: N nodes at the per-pod limit of `rate`, N+1 with one lost, and the pods
    sized for the nodes that run it when their count is known."""

    rec: Recommendation
    rate: ReplicaRate
    chosen_by: str
    nodes: int
    nodes_interval: tuple[int, int] | None
    scale_out: ScaleOut
    on_nodes: OnNodes | None
    warnings: tuple[str, ...] = ()

    @property
    def min_nodes(self) -> int:
        return self.nodes + 1

    @property
    def cores_per_pod(self) -> float:
        """What the DaemonSet's pods get: sized for the nodes that run it when known, else the per-pod limit."""
        return self.on_nodes.per_pod.cpu_cores if self.on_nodes is not None else self.rate.cores

    @property
    def basis(self) -> Rate:
        """The measured rate the pods are sized from."""
        return self.on_nodes.per_pod.basis if self.on_nodes is not None else self.rate.basis

    @property
    def memory_bytes(self) -> int | None:
        return self.on_nodes.per_pod.memory_bytes if self.on_nodes is not None else self.rec.memory_bytes


def _on_nodes(rec: Recommendation, nodes: int, source: str, scale_out: ScaleOut) -> OnNodes:
    carrying = max(1, nodes - 1)
    memory = rec.memory_bytes if rec.memory_from_model else None
    per_pod = recommend(rec.series, rec.target_rps / (carrying * scale_out.efficiency), rec.headroom,
                        memory_bytes=memory)  # fmt: skip
    return OnNodes(nodes, source, carrying, per_pod)


def plan_nodes(
    rec: Recommendation,
    cores_per_pod: float | None = None,
    nodes: int | None = None,
    nodes_source: str = "--nodes",
    scale_out: ScaleOut = ASSUMED,
) -> NodesPlan:
    """N and N+1 nodes for `rec` at `cores_per_pod` (None: the measured limit that runs the fewest cores at N+1),
    and the pods for `nodes` nodes when given."""
    series = rec.series
    pods = count_pods(rec, cores_per_pod, scale_out)
    rate = pods.rate
    on_nodes = _on_nodes(rec, nodes, nodes_source, scale_out) if nodes is not None else None
    warnings = [w for w in (rate_warning(series, rate),) if w]
    if on_nodes is not None:
        warnings += on_nodes.per_pod.warnings
    elif rec.memory_bytes is not None and rate.rps > series.peak_rps:
        warnings.append(f"memory measured up to {fmt.rps(series.peak_rps)} RPS only: watch Envoy's working set")
    return NodesPlan(rec, rate, pods.chosen_by, pods.count, pods.interval, scale_out, on_nodes, tuple(warnings))


def _on_nodes_lines(plan: NodesPlan) -> list[str]:
    on = plan.on_nodes
    if on is None:
        return [
            "  on M nodes:  --nodes M sizes each pod for the nodes that run it (with one lost, M - 1 carry the target)"
        ]
    per_pod, efficiency = on.per_pod, plan.scale_out.efficiency
    per = f"{on.carrying}" if efficiency == 1 else f"({on.carrying} x {efficiency:.2f})"
    lost = "with one node lost, " if on.nodes > 1 else ""
    lines = [
        f"  on {on.nodes} nodes ({on.source}): {lost}{on.carrying} pod{'s' if on.carrying > 1 else ''} carry "
        f"{fmt.rps(plan.rec.required_rps)}: a knee of {fmt.rps(per_pod.required_rps)} RPS per pod "
        f"= {fmt.rps(plan.rec.required_rps)} / {per}",
        f"               cpu {per_pod.cpu} per pod ({per_pod.sized_from}); memory {per_pod.memory}; "
        f"{on.nodes} x {per_pod.cpu} = {on.nodes * per_pod.cpu_cores:.2f} cores",
    ]
    if on.nodes == 1:
        lines.append("               one node has no N+1: losing it, or rolling its Envoy, stops the gateway")
    return lines


def format_nodes(plan: NodesPlan) -> list[str]:
    """The DaemonSet block of `recommend`'s output: each figure with the formula behind it."""
    rec, rate = plan.rec, plan.rate
    cores = rate.cores
    how = f"{rate.basis.source}, measured" if rate.measured else f"at the rate per core of {rate.basis.where}"
    rate_range = f", 95% CI {fmt.interval(*rate.interval)}" if rate.interval else ", no interval"
    efficiency = plan.scale_out.efficiency
    per = fmt.rps(rate.rps) if efficiency == 1 else f"({fmt.rps(rate.rps)} x {efficiency:.2f})"
    spread = ""
    if plan.nodes_interval is not None and plan.nodes_interval[0] != plan.nodes_interval[1]:
        spread = f"; {plan.nodes_interval[0]}-{plan.nodes_interval[1]} within its interval"
    carried = plan.nodes * rate.rps * efficiency
    return [
        f"DaemonSet (one Envoy pod per node; {NO_AUTOSCALER}):",
        f"  scale-out:   {plan.scale_out.text}",
        f"  per pod:     {fmt.rps(rate.rps)} RPS at {fmt.cpu(cores)} ({how}{rate_range}; {plan.chosen_by})",
        f"  nodes:       {plan.nodes} x {fmt.cpu(cores)} = {plan.nodes * cores:.2f} cores: "
        f"ceil({fmt.rps(rec.required_rps)} / {per}) = {plan.nodes}{spread}",
        f"  N+1:         {plan.min_nodes} nodes x {fmt.cpu(cores)} = {plan.min_nodes * cores:.2f} cores: with one node "
        f"lost, the other {plan.nodes} carry {fmt.rps(carried)} knee RPS >= {fmt.rps(rec.required_rps)}",
        *_on_nodes_lines(plan),
        "  rollout:     keep the DaemonSet's updateStrategy.rollingUpdate.maxUnavailable at 1: one node's Envoy at a "
        "time, as N+1 allows",
        *(f"warning: {w}" for w in plan.warnings),
    ]

"""Replicas and autoscaling from the measured limits, pure: the knee is per Envoy pod, so a target is served by pods.

- required knee RPS R = target x (1 + headroom), as for one pod (`sizing.recommend`);
- per replica: a CPU limit c (by default the measured limit that runs the fewest cores at N+1), serving the
  rate measured there (runner.report.series: its knee, or its capacity where latency broke first) with its
  interval; a limit the run did not measure is sized at the rate per core of the largest measured limit at or
  below it, and says so;
- replicas N = ceil(R / (rate(c) x E)), with E the scale-out efficiency (runner.report.scale_out: measured, or
  assumed 1 and said so); N+1 keeps R with one replica lost (a node drained, a pod restarting);
- HPA target utilization = floor(100 x u / ((1 + headroom) x imbalance)) percent of the CPU request (requests
  equal limits), u the utilization at the rate: the threshold (0.90) at a knee, by definition, or what the
  run measured at the capacity where latency broke first. A pod held at the target serves at most
  rate(c) / (1 + headroom) if its CPU grew in proportion to RPS; the HPA averages over the pods, and the
  busiest runs `imbalance` times the mean. Envoy's CPU per request falls as load rises, so it reaches the
  target earlier; where the run measured that limit, the real scale-out RPS is read off its steps.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from runner.model import RunSummary
from runner.report import formatting as fmt
from runner.report.scale_out import ASSUMED, ScaleOut
from runner.report.series import Rate, Series
from runner.report.sizing import Recommendation

__all__ = [
    "HPA_TOLERANCE",
    "MAX_REPLICAS_FACTOR",
    "MeasuredScaleOut",
    "PodCount",
    "ReplicaPlan",
    "ReplicaRate",
    "choose_cores",
    "count_pods",
    "format_replicas",
    "hpa_target_percent",
    "plan_replicas",
    "rate_at",
    "rate_warning",
    "replicas_for",
    "utilization_at",
]

MAX_REPLICAS_FACTOR = 2  # HPA maxReplicas = this x minReplicas: room for twice the target load
HPA_TOLERANCE = 0.1  # kube-controller-manager's default --horizontal-pod-autoscaler-tolerance


@dataclass(frozen=True)
class MeasuredScaleOut:
    """What the run measured at the per-replica limit: utilization at the sized per-pod RPS, and the RPS
    at which utilization first reached the HPA target (None when no step reached it)."""

    label: str
    rps_per_pod: float
    utilization: float
    scale_out_rps: float | None


@dataclass(frozen=True)
class ReplicaPlan:
    """Envoy pods for `rec.target_rps`: N replicas of `cores_per_replica`, N+1 with one lost, and an HPA."""

    rec: Recommendation
    threshold: float  # the utilization the rate stands at: the CPU threshold, or measured at the capacity
    rate: ReplicaRate
    chosen_by: str
    replicas: int
    replicas_interval: tuple[int, int] | None
    hpa_target_pct: int
    max_replicas: int
    measured: MeasuredScaleOut | None
    warnings: tuple[str, ...]
    scale_out: ScaleOut = ASSUMED

    @property
    def cores_per_replica(self) -> float:
        return self.rate.cores

    @property
    def knee_per_replica(self) -> float:
        """What one replica serves: the measured (or scaled) knee, or the capacity where latency broke first."""
        return self.rate.rps

    @property
    def min_replicas(self) -> int:
        """N+1: the HPA's minReplicas."""
        return self.replicas + 1

    @property
    def fleet_rate(self) -> float:
        """What one replica adds to the fleet: its rate times the scale-out efficiency."""
        return self.knee_per_replica * self.scale_out.efficiency

    @property
    def rps_per_pod_at_target(self) -> float:
        """The RPS a pod serves at the HPA target, if utilization grows in proportion to RPS."""
        return self.knee_per_replica * self.hpa_target_pct / 100 / self.threshold


@dataclass(frozen=True)
class ReplicaRate:
    """What one replica of `cores` serves: the rate measured at that limit, or scaled from `basis`."""

    cores: float
    rps: float
    interval: tuple[float, float] | None
    basis: Rate
    measured: bool


def rate_at(series: Series, cores: float) -> ReplicaRate:
    """The rate one replica of `cores` serves and its interval: measured when the run measured that limit,
    else the rate per core of the largest measured limit at or below it (the smallest below them all)."""
    measured = series.rate_at(cores)
    if measured is not None:
        return ReplicaRate(cores, measured.rps, measured.interval, measured, True)
    basis = series.basis_for(cores)
    per_core = basis.per_core_interval
    interval = (per_core[0] * cores, per_core[1] * cores) if per_core else None
    return ReplicaRate(cores, basis.per_core * cores, interval, basis, False)


def replicas_for(required_rps: float, knee_rps: float) -> int:
    """ceil(required / knee), at least one; the quotient is rounded to 9 places first so that an exact
    multiple is not pushed up by float noise."""
    return max(1, math.ceil(round(required_rps / knee_rps, 9)))


def hpa_target_percent(threshold: float, headroom: float, imbalance: float = 1.0) -> int:
    """floor(100 x threshold / ((1 + headroom) x imbalance)): 0.9 and 0.3 -> 69."""
    return max(1, math.floor(round(100 * threshold / ((1 + headroom) * imbalance), 9)))


def choose_cores(series: Series, required_rps: float, efficiency: float = 1.0) -> float:
    """The measured CPU limit that runs the fewest cores at N+1 for `required_rps` (fewer replicas on a tie)."""
    return min(
        (r.cores for r in series.rates),
        key=lambda c: (round((replicas_for(required_rps, rate_at(series, c).rps * efficiency) + 1) * c, 9), -c),
    )


def utilization_at(rate: Rate) -> float | None:
    """The utilization the run measured at a rate of its configuration, interpolated between its windows by RPS
    Envoy served; None outside them."""
    steps = sorted((s.envoy_rps, s.cpu_utilization_mean) for s in rate.config.steps if s.envoy_rps > 0)
    if len(steps) < 2 or not steps[0][0] <= rate.rps <= steps[-1][0]:
        return None
    return float(np.interp(rate.rps, [s[0] for s in steps], [s[1] for s in steps]))


def _measured(rate: ReplicaRate, rps_per_pod: float, target: float) -> MeasuredScaleOut | None:
    """Utilization at `rps_per_pod` and the first RPS reaching `target`, interpolated over the steps of the
    measured configuration at the replica's limit."""
    if not rate.measured:
        return None
    config = rate.basis.config
    steps = sorted(((s.envoy_rps, s.cpu_utilization_mean) for s in config.steps), key=lambda p: p[0])
    if len(steps) < 2 or not steps[0][0] <= rps_per_pod <= steps[-1][0]:
        return None
    rps = np.array([s[0] for s in steps])
    utilization = np.array([s[1] for s in steps])
    scale_out = None
    for (r0, u0), (r1, u1) in itertools.pairwise(steps):
        if u0 < target <= u1:
            scale_out = r0 + (target - u0) / (u1 - u0) * (r1 - r0)
            break
    return MeasuredScaleOut(config.label, rps_per_pod, float(np.interp(rps_per_pod, rps, utilization)), scale_out)


def rate_warning(series: Series, rate: ReplicaRate) -> str | None:
    """What a per-pod rate the run did not measure rests on, and the sweep that would measure it."""
    if rate.measured:
        return None
    high = series.largest.cores
    where = (
        f"beyond the largest measured limit ({fmt.cpu(high)}): extrapolated {rate.cores / high:.1f}x"
        if rate.cores > high
        else f"not measured (the run measured {', '.join(fmt.cpu(r.cores) for r in series.rates)})"
    )
    scaled = f"sized at {fmt.rps(rate.basis.per_core)} RPS per core of {rate.basis.where}"
    return (
        f"{fmt.cpu(rate.cores)} CPU per replica is {where}; {scaled}; confirm with a sweep at ENVOY_CPUS={rate.cores:g}"
    )


@dataclass(frozen=True)
class PodCount:
    """N pods of one CPU limit for a required knee: the rate one pod serves there, why that limit, N, and N's
    range over the rate's and the scale-out efficiency's intervals."""

    rate: ReplicaRate
    chosen_by: str
    count: int
    interval: tuple[int, int] | None


def count_pods(rec: Recommendation, cores_per_pod: float | None, scale_out: ScaleOut) -> PodCount:
    """N = ceil(R / (rate x E)) at `cores_per_pod` (None: the measured limit that runs the fewest cores at N+1)."""
    series, required = rec.series, rec.required_rps
    if cores_per_pod is None:
        cores = choose_cores(series, required, scale_out.efficiency)
        chosen_by = "the measured limit that runs the fewest cores at N+1"
    else:
        cores, chosen_by = cores_per_pod, "--cores-per-replica"
    rate = rate_at(series, cores)
    interval = None
    if rate.interval is not None or scale_out.interval is not None:
        low_rate, high_rate = rate.interval or (rate.rps, rate.rps)
        low_e, high_e = scale_out.bounds()
        interval = (replicas_for(required, high_rate * high_e), replicas_for(required, low_rate * low_e))
    return PodCount(rate, chosen_by, replicas_for(required, rate.rps * scale_out.efficiency), interval)


def plan_replicas(
    rec: Recommendation,
    threshold: float,
    cores_per_replica: float | None = None,
    summary: RunSummary | None = None,
    scale_out: ScaleOut = ASSUMED,
) -> ReplicaPlan:
    """Replicas, N+1 and the HPA target for `rec` (its target and headroom); `cores_per_replica` None chooses
    a measured limit. `summary` is the CLI's run; the series in `rec` already carries its configurations."""
    series = rec.series
    pods = count_pods(rec, cores_per_replica, scale_out)
    rate, chosen_by, replicas, replicas_interval = pods.rate, pods.chosen_by, pods.count, pods.interval
    warnings = [w for w in (rate_warning(series, rate),) if w]
    if rec.memory_bytes is not None and rate.rps > series.peak_rps:
        warnings.append(
            f"memory measured up to {fmt.rps(series.peak_rps)} RPS only, below the {fmt.rps(rate.rps)} RPS a replica "
            "may serve; watch Envoy's working set at that load"
        )
    if rate.basis.source == "capacity":
        at_capacity = utilization_at(rate.basis)
        if at_capacity is not None and at_capacity < threshold:
            threshold = at_capacity
        else:
            warnings.append(
                f"latency broke below the {threshold:.0%} CPU threshold at {fmt.cpu(rate.basis.cores)}, at a "
                "utilization the run's windows do not place: an HPA on the knee's utilization may scale out later "
                "than the capacity needs"
            )
    target_pct = hpa_target_percent(threshold, rec.headroom, scale_out.imbalance)
    measured = _measured(rate, rate.rps * target_pct / 100 / threshold, target_pct / 100)
    return ReplicaPlan(
        rec=rec,
        threshold=threshold,
        rate=rate,
        chosen_by=chosen_by,
        replicas=replicas,
        replicas_interval=replicas_interval,
        hpa_target_pct=target_pct,
        max_replicas=MAX_REPLICAS_FACTOR * (replicas + 1),
        measured=measured,
        warnings=tuple(warnings),
        scale_out=scale_out,
    )


def _cores_total(replicas: int, cores: float) -> str:
    return f"{replicas} x {fmt.cpu(cores)} = {replicas * cores:.2f} cores"


def _per(plan: ReplicaPlan) -> str:
    """The rate one replica adds in a formula: "1,804", or "(1,804 x 0.86)" with a scale-out efficiency."""
    efficiency = plan.scale_out.efficiency
    knee = fmt.rps(plan.knee_per_replica)
    return knee if efficiency == 1 else f"({knee} x {efficiency:.2f})"


def _hpa_formula(plan: ReplicaPlan) -> str:
    imbalance, headroom = plan.scale_out.imbalance, f"(1 + {plan.rec.headroom:g})"
    under = headroom if imbalance == 1 else f"({headroom} x {imbalance:.2f} imbalance)"
    return f"floor(100 x {plan.threshold:.3g} / {under})"


def format_replicas(plan: ReplicaPlan) -> list[str]:
    """The replicas block of `recommend`'s output: each figure with the formula behind it."""
    rec, cores, knee = plan.rec, plan.cores_per_replica, plan.knee_per_replica
    rate = plan.rate
    how = f"{rate.basis.source}, measured" if rate.measured else f"at the rate per core of {rate.basis.where}"
    knee_range = f", 95% CI {fmt.interval(*rate.interval)}" if rate.interval else ", no interval"
    spread = ""
    if plan.replicas_interval is not None:
        low, high = plan.replicas_interval
        spread = f"; {low}-{high} within its interval" if low != high else ""
    threshold, target, headroom = fmt.percent(plan.threshold), plan.hpa_target_pct, rec.headroom
    at = (
        f"the knee is {threshold} by definition"
        if rate.basis.source == "knee"
        else f"the capacity ran at {threshold} (measured)"
    )
    lines = [
        f"Replicas (the knee is per Envoy pod; {fmt.cpu(cores)} CPU per replica: {plan.chosen_by}):",
        f"  per replica: {fmt.rps(knee)} RPS at {fmt.cpu(cores)} ({how}{knee_range}); "
        f"resources {{cpu: {fmt.cpu(cores)}, memory: {rec.memory}}}",
        f"  scale-out:   {plan.scale_out.text}",
        f"  replicas:    {_cores_total(plan.replicas, cores)}: ceil({fmt.rps(rec.required_rps)} / {_per(plan)}) = "
        f"{plan.replicas}{spread}",
        f"  N+1:         {_cores_total(plan.min_replicas, cores)}: with one replica lost, the other {plan.replicas} "
        f"carry {fmt.rps(plan.replicas * plan.fleet_rate)} knee RPS >= {fmt.rps(rec.required_rps)}",
        f"  HPA target:  {target}% CPU utilization = {_hpa_formula(plan)} of the request (= the limit); {at},",
        f"               so a pod held at {target}% serves <= {target}/{100 * plan.threshold:.3g} x {fmt.rps(knee)} = "
        f"{fmt.rps(plan.rps_per_pod_at_target)} RPS (~ {rate.basis.source} / {1 + headroom:g}) if its CPU "
        "grows in proportion to RPS",
    ]
    if plan.measured is not None:
        m = plan.measured
        reached = (
            f"it reached {plan.hpa_target_pct}% at {fmt.rps(m.scale_out_rps)} RPS"
            if m.scale_out_rps is not None
            else f"no step reached {plan.hpa_target_pct}%"
        )
        side = "scale-out comes earlier: the safe side" if m.utilization >= plan.hpa_target_pct / 100 else "check it"
        lines.append(
            f"               measured ({m.label}): {fmt.rps(m.rps_per_pod)} RPS ran at {fmt.percent(m.utilization)}; "
            f"{reached} ({side})"
        )
    tolerance = plan.hpa_target_pct * (1 + HPA_TOLERANCE)
    lines += [
        f"               the HPA acts beyond its {HPA_TOLERANCE:.0%} tolerance ({tolerance:.0f}%), still below "
        f"the {rate.basis.source}'s {threshold}",
        f"  HPA range:   min {plan.min_replicas} (N+1), max {plan.max_replicas} ({MAX_REPLICAS_FACTOR} x min): "
        f"{fmt.rps(plan.max_replicas * plan.rps_per_pod_at_target)} RPS at the target utilization",
    ]
    lines += [f"warning: {w}" for w in plan.warnings]
    return lines

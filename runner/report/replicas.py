"""Replicas and autoscaling from the knee fit, pure: the knee is per Envoy pod, so a target is served by pods.

- required knee RPS R = target x (1 + headroom), as for one pod (`sizing.recommend`);
- per replica: a CPU limit c inside the measured range (by default the measured limit that runs the fewest
  cores at N+1), whose knee k(c) comes from the fit;
- replicas N = ceil(R / k(c)); N+1 keeps R with one replica lost (a node drained, a pod restarting);
- HPA target utilization = floor(100 x threshold / (1 + headroom)) percent of the CPU request (requests equal
  limits): the knee is where utilization reaches the threshold (0.90), so a pod held at the target serves at
  most k(c) / (1 + headroom) if its CPU grew in proportion to RPS. Envoy's CPU per request falls as load
  rises, so it reaches the target earlier; where the run measured that limit, the real scale-out RPS is
  read off its steps.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from runner.errors import UsageError
from runner.model import RunSummary
from runner.report import formatting as fmt
from runner.report.sizing import Fit, Recommendation

__all__ = [
    "HPA_TOLERANCE",
    "MAX_REPLICAS_FACTOR",
    "MeasuredScaleOut",
    "ReplicaPlan",
    "choose_cores",
    "format_replicas",
    "hpa_target_percent",
    "knee_at",
    "plan_replicas",
    "replicas_for",
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
    threshold: float
    cores_per_replica: float
    chosen_by: str
    knee_per_replica: float
    knee_interval: tuple[float, float] | None
    replicas: int
    replicas_interval: tuple[int, int | None] | None
    hpa_target_pct: int
    max_replicas: int
    measured: MeasuredScaleOut | None
    warnings: tuple[str, ...]

    @property
    def min_replicas(self) -> int:
        """N+1: the HPA's minReplicas."""
        return self.replicas + 1

    @property
    def rps_per_pod_at_target(self) -> float:
        """The RPS a pod serves at the HPA target, if utilization grows in proportion to RPS."""
        return self.knee_per_replica * self.hpa_target_pct / 100 / self.threshold


def knee_at(fit: Fit, cores: float) -> tuple[float, tuple[float, float] | None]:
    """The fit's knee RPS at `cores`, and its range over the slope's 95% interval (pivoting on the knees'
    centroid, as `Fit.cores_for` does), low first."""
    value = fit.rps_at(cores)
    if fit.slope_interval is None:
        return value, None
    mean_x = sum(p.cpu_cores for p in fit.points) / len(fit.points)
    mean_y = sum(p.rps for p in fit.points) / len(fit.points)
    ends = sorted(mean_y + slope * (cores - mean_x) for slope in fit.slope_interval)
    return value, (ends[0], ends[1])


def replicas_for(required_rps: float, knee_rps: float) -> int:
    """ceil(required / knee), at least one; the quotient is rounded to 9 places first so that an exact
    multiple is not pushed up by float noise."""
    return max(1, math.ceil(round(required_rps / knee_rps, 9)))


def hpa_target_percent(threshold: float, headroom: float) -> int:
    """floor(100 x threshold / (1 + headroom)): 0.9 and 0.3 -> 69."""
    return max(1, math.floor(round(100 * threshold / (1 + headroom), 9)))


def choose_cores(fit: Fit, required_rps: float) -> float:
    """The measured CPU limit that runs the fewest cores at N+1 for `required_rps` (fewer replicas on a tie)."""
    candidates = sorted({p.cpu_cores for p in fit.points if fit.rps_at(p.cpu_cores) > 0}, reverse=True)
    if not candidates:
        raise UsageError(f"the fit ({fit.equation()}) gives no positive knee at any measured CPU limit")
    return min(candidates, key=lambda c: (round((replicas_for(required_rps, fit.rps_at(c)) + 1) * c, 9), -c))


def _measured(
    summary: RunSummary | None, fit: Fit, cores: float, rps_per_pod: float, target: float
) -> MeasuredScaleOut | None:
    """Utilization at `rps_per_pod` and the first RPS reaching `target`, interpolated over the steps of the
    fitted configuration at `cores` (the first one, when several arrival models ran)."""
    if summary is None:
        return None
    fitted = {p.label for p in fit.points}
    config = next(
        (c for c in summary.configs if c.label in fitted and c.valid_knee and math.isclose(c.envoy.cpu_cores, cores)),
        None,
    )
    if config is None:
        return None
    steps = sorted(
        ((s.envoy_rps if s.envoy_rps is not None else s.rps, s.cpu_utilization_mean) for s in config.steps),
        key=lambda p: p[0],
    )
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


def plan_replicas(
    rec: Recommendation,
    threshold: float,
    cores_per_replica: float | None = None,
    summary: RunSummary | None = None,
) -> ReplicaPlan:
    """Replicas, N+1 and the HPA target for `rec` (its target and headroom); `cores_per_replica` None chooses
    a measured limit; `summary` (the run) adds the measured scale-out point."""
    fit = rec.fit
    if cores_per_replica is None:
        cores = choose_cores(fit, rec.required_rps)
        chosen_by = "the measured limit that runs the fewest cores at N+1"
    else:
        cores, chosen_by = cores_per_replica, "--cores-per-replica"
    knee, interval = knee_at(fit, cores)
    if knee <= 0:
        raise UsageError(
            f"the fit gives no positive knee at {fmt.cpu(cores)} CPU per replica ({fit.equation()})",
            "choose --cores-per-replica within the measured "
            f"{fmt.cpu(fit.cores_range[0])}-{fmt.cpu(fit.cores_range[1])}",
        )
    replicas = replicas_for(rec.required_rps, knee)
    replicas_interval: tuple[int, int | None] | None = None
    if interval is not None:
        low_knee, high_knee = interval
        replicas_interval = (
            replicas_for(rec.required_rps, high_knee),
            replicas_for(rec.required_rps, low_knee) if low_knee > 0 else None,
        )
    warnings = []
    if fit.extrapolation(cores) > 1.0:
        low, high = fit.cores_range
        warnings.append(
            f"extrapolated {fit.extrapolation(cores):.1f}x: {fmt.cpu(cores)} CPU per replica is outside the measured "
            f"{fmt.cpu(low)}-{fmt.cpu(high)}; confirm its knee with a sweep at ENVOY_CPUS={cores:g}"
        )
    peak_rps = max(p.peak_rps for p in fit.points)
    if rec.memory_bytes is not None and knee > peak_rps:
        warnings.append(
            f"memory measured up to {fmt.rps(peak_rps)} RPS only, below the {fmt.rps(knee)} RPS a replica may serve; "
            "watch Envoy's working set at that load"
        )
    target_pct = hpa_target_percent(threshold, rec.headroom)
    measured = _measured(summary, fit, cores, knee * target_pct / 100 / threshold, target_pct / 100)
    return ReplicaPlan(
        rec=rec,
        threshold=threshold,
        cores_per_replica=cores,
        chosen_by=chosen_by,
        knee_per_replica=knee,
        knee_interval=interval,
        replicas=replicas,
        replicas_interval=replicas_interval,
        hpa_target_pct=target_pct,
        max_replicas=MAX_REPLICAS_FACTOR * (replicas + 1),
        measured=measured,
        warnings=tuple(warnings),
    )


def _cores_total(replicas: int, cores: float) -> str:
    return f"{replicas} x {fmt.cpu(cores)} = {replicas * cores:.2f} cores"


def format_replicas(plan: ReplicaPlan) -> list[str]:
    """The replicas block of `recommend`'s output: each figure with the formula behind it."""
    rec, cores, knee = plan.rec, plan.cores_per_replica, plan.knee_per_replica
    knee_range = ""
    if plan.knee_interval is not None:
        low_knee, high_knee = plan.knee_interval
        knee_range = f", {fmt.rps(low_knee)}-{fmt.rps(high_knee)} within the slope's 95% interval"
    spread = ""
    if plan.replicas_interval is not None:
        low, high = plan.replicas_interval
        spread = f"; {low}-{high if high is not None else 'unbounded'} within the interval"
    threshold, target, headroom = fmt.percent(plan.threshold), plan.hpa_target_pct, rec.headroom
    lines = [
        f"Replicas (the knee is per Envoy pod; {fmt.cpu(cores)} CPU per replica: {plan.chosen_by}):",
        f"  per replica: knee {fmt.rps(knee)} RPS at {fmt.cpu(cores)} by the fit{knee_range}; "
        f"resources {{cpu: {fmt.cpu(cores)}, memory: {rec.memory}}}",
        f"  replicas:    {_cores_total(plan.replicas, cores)}: ceil({fmt.rps(rec.required_rps)} / {fmt.rps(knee)}) = "
        f"{plan.replicas}{spread}",
        f"  N+1:         {_cores_total(plan.min_replicas, cores)}: with one replica lost, the other {plan.replicas} "
        f"carry {fmt.rps(plan.replicas * knee)} knee RPS >= {fmt.rps(rec.required_rps)}",
        f"  HPA target:  {target}% CPU utilization = floor(100 x {plan.threshold:g} / (1 + {headroom:g})) "
        f"of the request (= the limit); the knee is {threshold} by definition,",
        f"               so a pod held at {target}% serves <= {target}/{100 * plan.threshold:g} x {fmt.rps(knee)} = "
        f"{fmt.rps(plan.rps_per_pod_at_target)} RPS (~ knee / {1 + headroom:g}) if its CPU "
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
        f"the knee's {threshold}",
        f"  HPA range:   min {plan.min_replicas} (N+1), max {plan.max_replicas} ({MAX_REPLICAS_FACTOR} x min): "
        f"{fmt.rps(plan.max_replicas * plan.rps_per_pod_at_target)} RPS at the target utilization",
    ]
    lines += [f"warning: {w}" for w in plan.warnings]
    return lines

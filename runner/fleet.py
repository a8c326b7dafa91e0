"""The knee per pod of a fleet of Envoy pods, and how the fleet scales out. Pure.

A window's utilization is its busiest pod's (runner.measure), so a configuration's knee (runner.knee) is the
fleet's RPS when its busiest pod reaches the threshold. The knee per pod comes from the pods' own windows: each
pod of each window is one point (its share of the RPS, its own utilization), fitted the way the fleet's windows
are (rounds with a jackknife interval, else one pass), so with one pod it is exactly the fleet's knee.

The scale-out efficiency of N pods is fleet knee(N) / (N x knee per pod of one pod); for one pod the knee per
pod is the fleet's, so it is the ratio of two configurations' knees over N, paired round by round with its
interval (runner.figures). "N pods of k cores or one pod of N x k" is the ratio of those two fleets' knees,
paired the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import Estimate
from runner.figures import knee_ratio
from runner.knee import FIT_FLOOR, KneeResult, find_knee, fit_windows
from runner.model import ConfigResult, PodKnee, Step

__all__ = [
    "FleetComparison",
    "bigger_pods",
    "imbalance",
    "pod_knee",
    "pod_knee_ratio",
    "pod_steps",
    "scale_out",
    "twin",
]


def pod_steps(steps: Sequence[Step]) -> list[Step]:
    """Every pod of every window as a window of its own: the pod's share of the RPS (and of the offered rate), its
    own utilization, CPU, throttling and Envoy counts; the window's guards, round and load. A window saved
    before per-pod windows stands for its one pod."""
    found: list[Step] = []
    for step in steps:
        if not step.pods:
            found.append(step)
            continue
        for pod in step.pods:
            share = pod.rps / step.rps if step.rps > 0 else 1 / len(step.pods)
            found.append(
                step.model_copy(
                    update={
                        "rps": pod.rps,
                        "target_rps": step.target_rps * share if step.target_rps is not None else None,
                        "envoy_rps": pod.envoy_rps if pod.envoy_rps is not None else pod.rps,
                        "envoy_cx_rate": pod.envoy_cx_rate,
                        "cpu_utilization_min": pod.cpu_utilization_min,
                        "cpu_utilization_mean": pod.cpu_utilization_mean,
                        "cpu_utilization_max": pod.cpu_utilization_max,
                        "envoy_cpu_cores": pod.cpu_cores,
                        "throttled_share": pod.throttled_share,
                        "pods": (pod,),
                    }
                )
            )
    return found


def pod_count(steps: Sequence[Step]) -> int:
    """The most pods any window measured (1 for windows saved before per-pod windows)."""
    return max((len(s.pods) for s in steps), default=0) or 1


def imbalance(steps: Sequence[Step], threshold: float) -> float | None:
    """How unevenly the pods shared the load near the knee: the busiest pod's RPS over the mean pod's, the median
    over the windows the knee's fit uses (else those above FIT_FLOOR of the threshold); 1.0 for one pod, None
    without such a window."""
    near = fit_windows(steps, threshold) or [s for s in steps if s.cpu_utilization_mean >= FIT_FLOOR * threshold]
    ratios = []
    for step in near:
        rates = [p.rps for p in step.pods] or [step.rps]
        mean = sum(rates) / len(rates)
        if mean > 0:
            ratios.append(max(rates) / mean)
    return statistics.median(ratios) if ratios else None


def pod_knee(steps: Sequence[Step], threshold: float) -> tuple[PodKnee | None, KneeResult]:
    """The knee per pod, fitted from every pod's own windows, with the fleet it was measured in; None (with the
    reason in the KneeResult) when the pods' windows place no knee."""
    outcome = find_knee(pod_steps(steps), threshold)
    if outcome.knee is None:
        return None, outcome
    return PodKnee(knee=outcome.knee, pods=pod_count(steps), imbalance=imbalance(steps, threshold)), outcome


def twin(config: ConfigResult, configs: Sequence[ConfigResult], *, replicas: int) -> ConfigResult | None:
    """The configuration that differs from `config` only in its pod count, running `replicas` pods."""
    return next(
        (
            c
            for c in configs
            if c.envoy.replicas == replicas
            and c.envoy.cpu_cores == config.envoy.cpu_cores
            and c.envoy.memory == config.envoy.memory
            and c.key.split(",", 1)[1:] == config.key.split(",", 1)[1:]
        ),
        None,
    )


def pod_knee_ratio(fleet: ConfigResult, single: ConfigResult, threshold: float) -> Estimate | None:
    """The knee per pod of `fleet` over that of `single` (for one pod, its knee), paired round by round over the pods'
    own windows (runner.figures.knee_ratio); None as for knee_ratio, or without a knee per pod."""
    if fleet.pod_knee is None:
        return None
    single_knee = single.pod_knee.knee if single.pod_knee is not None else single.knee
    pods = fleet.model_copy(update={"steps": pod_steps(fleet.steps), "knee": fleet.pod_knee.knee})
    alone = single.model_copy(update={"steps": pod_steps(single.steps), "knee": single_knee})
    return knee_ratio(pods, alone, threshold)


def scale_out(fleet: ConfigResult, single: ConfigResult, threshold: float) -> Estimate | None:
    """fleet knee(N) / (N x knee per pod of one pod), paired round by round with its interval (None as for
    runner.figures.knee_ratio: fewer than three rounds in common, or a knee not from the rounds fit)."""
    ratio = knee_ratio(fleet, single, threshold)
    if ratio is None:
        return None
    pods = fleet.envoy.replicas / single.envoy.replicas
    return Estimate(ratio.value / pods, ratio.low / pods, ratio.high / pods, ratio.rounds)


@dataclass(frozen=True)
class FleetComparison:
    """Two ways to the same CPU: `many` pods of k cores against `one` pod of N x k (or any two fleets of the same
    total limit), with fleet knee(many) / knee(one), paired round by round (None: no interval)."""

    many: ConfigResult
    one: ConfigResult
    ratio: Estimate | None

    @property
    def value(self) -> float | None:
        """The ratio: its paired estimate, else the ratio of the two valid knees (None: either knee invalid)."""
        if self.ratio is not None:
            return self.ratio.value
        many, one = self.many.valid_knee, self.one.valid_knee
        return many.rps / one.rps if many is not None and one is not None else None


def bigger_pods(configs: Sequence[ConfigResult], threshold: float) -> list[FleetComparison]:
    """Every pair of fleets the run measured with the same total CPU limit, more pods against fewer (same
    memory, profile, arrivals and backend): "N pods of k cores or one pod of N x k"."""
    pairs = []
    for many in configs:
        for one in configs:
            if (
                many.envoy.replicas > one.envoy.replicas
                and abs(many.envoy.fleet_cpu_cores - one.envoy.fleet_cpu_cores) < 1e-9
                and many.envoy.memory == one.envoy.memory
                and many.key.split(",", 1)[1:] == one.key.split(",", 1)[1:]
            ):
                pairs.append(FleetComparison(many, one, knee_ratio(many, one, threshold)))
    return pairs

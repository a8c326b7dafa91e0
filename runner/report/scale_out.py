"""How N Envoy pods add up, for sizing: the scale-out efficiency and the imbalance between pods.

The efficiency E(N) = fleet knee(N) / (N x per-pod knee(1)) is below 1 when N pods serve less than N times one:
the busiest pod reaches the threshold first (the Service spreads connections, not requests, and not evenly),
and pods share nodes. The imbalance is the busiest pod's RPS over the pods' mean at the knee: an HPA averages
utilization over the pods, so the busiest pod reaches the knee's utilization while the average reads that much
less. A fleet of N pods of per-pod rate k serves N x k x E, and is sized so; E's interval widens the replicas'.

A run that measured one pod per configuration measured neither: sizing then assumes E = 1 and an even spread
(exactly true of one pod), and says so wherever it uses them. A run that measured a fleet beside the same pod
alone (ENVOY_REPLICAS=1,2) measured both (runner.fleet), E paired round by round with its interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.fleet import scale_out, twin
from runner.model import RunSummary
from runner.report import formatting as fmt
from runner.report.series import Series

__all__ = ["ASSUMED", "ScaleOut", "scale_out_of"]


@dataclass(frozen=True)
class ScaleOut:
    """The efficiency (with its 95% interval, and the pod count it was measured at) and the imbalance, or the
    assumption standing in for them (`measured` False) with why."""

    efficiency: float
    interval: tuple[float, float] | None
    replicas: int | None
    imbalance: float
    measured: bool
    why: str

    @property
    def text(self) -> str:
        """ "assumed 1.00 (...)" or "0.86 (95% CI 0.80-0.92) measured at 2 pods; imbalance 1.07" """
        if not self.measured:
            return f"efficiency assumed {self.efficiency:.2f}, imbalance assumed {self.imbalance:.2f}: {self.why}"
        ci = f", 95% CI {self.interval[0]:.2f}-{self.interval[1]:.2f}" if self.interval else ", no interval"
        return (
            f"efficiency {self.efficiency:.2f}{ci}, measured at {self.replicas} pods against one; "
            f"imbalance {self.imbalance:.2f} (the busiest pod's RPS over the mean): {self.why}"
        )

    def bounds(self) -> tuple[float, float]:
        """The efficiency's interval, or the efficiency itself at both ends."""
        return self.interval if self.interval is not None else (self.efficiency, self.efficiency)


ASSUMED = ScaleOut(
    efficiency=1.0,
    interval=None,
    replicas=None,
    imbalance=1.0,
    measured=False,
    why=(
        "the run measured one Envoy pod per configuration, so N pods are taken to serve N times one pod's knee, "
        "spread evenly (measure it: make sweep ENVOY_REPLICAS=1,2)"
    ),
)


def scale_out_of(summary: RunSummary, series: Series) -> ScaleOut:
    """What the run measured of how pods add up at the series' limits (runner.fleet: the fleet of the most pods
    beside its one pod at a measured limit, the largest such limit first); the assumption where it measured none."""
    pods = {config.envoy.replicas for config in summary.configs}
    if pods <= {1}:
        return ASSUMED
    for rate in reversed(series.rates):
        single = rate.config
        fleets = [c for c in summary.configs if c.envoy.replicas > 1 and twin(c, [single], replicas=1) is single]
        fleet = max((c for c in fleets if c.valid_knee is not None), key=lambda c: c.envoy.replicas, default=None)
        if fleet is None or fleet.valid_knee is None or single.valid_knee is None:
            continue
        estimate = scale_out(fleet, single, summary.threshold)
        count = fleet.envoy.replicas
        value = estimate.value if estimate else fleet.valid_knee.rps / (count * single.valid_knee.rps)
        found = fleet.valid_pod_knee
        how = f"paired over {estimate.rounds} rounds" if estimate else "no interval: fewer than 3 rounds in common"
        return ScaleOut(
            efficiency=value,
            interval=(estimate.low, estimate.high) if estimate else None,
            replicas=count,
            imbalance=found.imbalance if found is not None and found.imbalance else 1.0,
            measured=True,
            why=f"{count} pods of {fmt.cpu(single.envoy.cpu_cores)} against one, {how}",
        )
    return ScaleOut(
        efficiency=1.0,
        interval=None,
        replicas=None,
        imbalance=1.0,
        measured=False,
        why=f"the run ran {', '.join(str(p) for p in sorted(pods))} pods, but no fleet with a valid knee beside the "
        "same pod alone at a limit sizing reads: assumed",
    )

"""The fleet in the report, pure: for each configuration of several Envoy pods, its knee per pod, the fleet's knee,
how unevenly the pods shared the load, and the scale-out efficiency against the same pod alone (runner.fleet: fleet
knee(N) / (N x knee per pod of one pod), paired round by round); where the run measured both, N pods of k cores
against one pod of N x k. Every figure with its interval, or the plain statement that it has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import Estimate
from runner.fleet import FleetComparison, bigger_pods, pod_knee_ratio, scale_out, twin
from runner.model import ConfigResult, Environment, Knee, RunSummary
from runner.report import formatting as fmt

__all__ = ["FleetRow", "FleetSection", "build_fleet"]


def _pods(config: ConfigResult) -> str:
    """ "2 pods of 250m (1 worker thread each)" """
    envoy = config.envoy
    threads = fmt.concurrency(envoy.concurrency)
    each = f"{threads} worker thread{'s' if threads != '1' else ''} each"
    return f"{envoy.replicas} pod{'s' if envoy.replicas != 1 else ''} of {fmt.cpu(envoy.cpu_cores)} ({each})"


def _knee(knee: Knee | None) -> str:
    """ "1,003 RPS (95% CI 960-1,040 RPS, 3 interleaved rounds)" """
    return f"{fmt.rps(knee.rps)} RPS ({fmt.knee_from(knee)})" if knee is not None else "no valid knee"


def _one_pass(a: ConfigResult, b: ConfigResult | None) -> bool:
    """The two were measured in one round together at most: no paired interval."""
    return b is None or len({s.round for s in a.steps} & {s.round for s in b.steps}) <= 1


def _estimate(value: float | None, estimate: Estimate | None, one_pass: bool) -> str:
    if estimate is not None:
        ci = fmt.interval(estimate.low, estimate.high)
        return f"{fmt.times(estimate.value)} (95% CI {ci}, paired over {estimate.rounds} rounds)"
    why = "one pass" if one_pass else "fewer than 3 rounds with a knee in both"
    return f"{fmt.times(value)} (no interval: {why})"


@dataclass(frozen=True)
class FleetRow:
    """One configuration of several pods beside the same pod alone (`single`, None when the run did not measure
    it): its knee per pod and the fleet's, the imbalance, and the scale-out efficiency."""

    config: ConfigResult
    single: ConfigResult | None
    efficiency: Estimate | None  # paired round by round (None: no interval)
    threshold: float
    shared_cpus: str | None = None  # the CPUs Envoy's pods shared on this machine (local platform), if known
    pod_ratio: Estimate | None = None  # knee per pod / one pod's knee, paired round by round (None: no interval)

    @property
    def pods(self) -> int:
        return self.config.envoy.replicas

    @property
    def pod_knee(self) -> Knee | None:
        found = self.config.valid_pod_knee
        return found.knee if found is not None else None

    @property
    def imbalance(self) -> float | None:
        found = self.config.valid_pod_knee
        return found.imbalance if found is not None else None

    @property
    def single_knee(self) -> Knee | None:
        """One pod's knee: for one pod, the knee per pod is the fleet's."""
        return self.single.valid_knee if self.single is not None else None

    @property
    def efficiency_value(self) -> float | None:
        if self.efficiency is not None:
            return self.efficiency.value
        fleet, single = self.config.valid_knee, self.single_knee
        return fleet.rps / (self.pods * single.rps) if fleet is not None and single is not None else None

    @property
    def efficiency_text(self) -> str:
        """ "0.97x (95% CI 0.93-1.01, paired over 3 rounds)", or why it has no interval, or why there is none."""
        if self.single is None:
            return "not measured: the run has no configuration of the same pod alone (add ENVOY_REPLICAS=1)"
        if self.efficiency_value is None:
            return "none: a knee is not valid"
        return _estimate(self.efficiency_value, self.efficiency, _one_pass(self.config, self.single))

    @property
    def within_single(self) -> bool | None:
        """Whether the knee per pod lies inside the interval of the same pod's knee alone (None: either missing)."""
        knee, single = self.pod_knee, self.single_knee
        if knee is None or single is None or single.interval is None:
            return None
        return single.interval[0] <= knee.rps <= single.interval[1]

    @property
    def consistency(self) -> str:
        """Whether a pod of the fleet reached the threshold where the same pod alone did: its knee per pod against one
        pod's interval, and paired round by round; where the pairing says it moved, by how much its CPU per request
        at the threshold moved (a knee per pod is the threshold's CPU over that cost)."""
        knee, single = self.pod_knee, self.single_knee
        if knee is None or single is None:
            return ""
        if single.interval is None:
            where = f"one pod's knee ({fmt.rps(single.rps)} RPS) has no interval to hold the knee per pod against"
        else:
            side = "inside" if self.within_single else "below" if knee.rps < single.interval[0] else "above"
            where = f"the knee per pod lies {side} one pod's interval ({fmt.interval(*single.interval)} RPS)"
        paired = self.pod_ratio
        if paired is not None:
            ci = fmt.interval(paired.low, paired.high)
            where += f"; paired round by round it is {fmt.times(paired.value)} one pod's knee (95% CI {ci})"
            moved = paired.high < 1 or paired.low > 1
        else:
            moved = self.within_single is False
        if not moved:
            return f"{where}: no sign the pods slowed each other."
        cost = self.threshold * self.config.envoy.cpu_cores * 1e6
        shared = f"; the pods shared CPU {self.shared_cpus} on this machine" if self.shared_cpus else ""
        return (
            f"{where}: at the threshold each pod of the fleet spent {fmt.microseconds(cost / knee.rps)} of CPU per "
            f"request, one pod alone {fmt.microseconds(cost / single.rps)}{shared}."
        )

    @property
    def text(self) -> str:
        """The row as a sentence, for the first screen."""
        imbalance = f"; imbalance {self.imbalance:.2f}" if self.imbalance is not None else ""
        return (
            f"{_pods(self.config)}: knee per pod {_knee(self.pod_knee)}, fleet knee {_knee(self.config.valid_knee)}"
            f"{imbalance}; scale-out efficiency {self.efficiency_text}"
        )


def _comparison_text(pair: FleetComparison) -> str:
    """ "2 pods of 250m serve 1.05x (95% CI 0.98-1.12, paired over 3 rounds) what 1 pod of 500m serves" """
    value = pair.value
    if value is None:
        return f"{_pods(pair.many)} against {_pods(pair.one)}: no valid knee in both"
    figure = _estimate(value, pair.ratio, _one_pass(pair.many, pair.one))
    return f"{_pods(pair.many)} serve {figure} what {_pods(pair.one)} serves"


@dataclass(frozen=True)
class FleetSection:
    """The run's fleets: a row per configuration of several pods, and "more pods or bigger pods" where measured."""

    rows: tuple[FleetRow, ...]
    comparisons: tuple[FleetComparison, ...]

    @property
    def headline(self) -> str:
        """What the first screen says of the fleets."""
        parts = [row.text for row in self.rows]
        parts += [_comparison_text(pair) for pair in self.comparisons]
        return "; ".join(parts)

    @property
    def notes(self) -> tuple[str, ...]:
        """Each row's check of its knee per pod against the same pod alone."""
        return tuple(f"{_pods(r.config)}: {r.consistency}" for r in self.rows if r.consistency)

    @property
    def comparison_texts(self) -> tuple[str, ...]:
        return tuple(_comparison_text(pair) for pair in self.comparisons)


def _shared_cpus(environment: Environment) -> str | None:
    isolation = environment.isolation
    return isolation.envoy_cpus if isolation is not None else None


def build_fleet(summary: RunSummary, configs: Sequence[ConfigResult] | None = None) -> FleetSection | None:
    """The run's fleet section; None when every configuration ran one pod."""
    measured = [c for c in (configs if configs is not None else summary.configs) if c.steps]
    fleets = [c for c in measured if c.envoy.replicas > 1]
    if not fleets:
        return None
    threshold = summary.threshold
    rows = []
    for config in fleets:
        single = twin(config, measured, replicas=1)
        efficiency = scale_out(config, single, threshold) if single is not None else None
        paired = pod_knee_ratio(config, single, threshold) if single is not None else None
        rows.append(FleetRow(config, single, efficiency, threshold, _shared_cpus(summary.environment), paired))
    return FleetSection(tuple(rows), tuple(bigger_pods(measured, threshold)))

"""Figures measured inside one run, with what they know: the machine's own drift (the control window) and
ratios between configurations paired round by round. Pure.

Absolute figures move 2-4x between machines and tens of percent within a run; a ratio of two
configurations measured in the same round shares the round's machine, so the drift cancels in it. Each
ratio here is the per-round ratio's geometric mean with a jackknife interval over the rounds both have.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import Estimate, RoundPoint, jackknife, rounds_fit
from runner.knee import fit_windows
from runner.model import ConfigResult, RunSummary, Step


@dataclass(frozen=True)
class ControlDrift:
    """The control window across the run's rounds: Envoy's CPU per request at one configuration and one
    offered rate. Its spread is how far the machine's own speed moved while the run measured."""

    label: str
    offered_rps: float
    us_per_request: tuple[float, ...]  # one per round, in round order
    rounds: tuple[int, ...]
    steal_max: float | None  # the most CPU time the hypervisor stole in any window of the run (None: not read)

    @property
    def median_us(self) -> float:
        return statistics.median(self.us_per_request)

    @property
    def spread(self) -> float:
        """Half the range around the median, as a share of it (0.05: the machine moved +-5%)."""
        low, high = min(self.us_per_request), max(self.us_per_request)
        return (high - low) / 2 / self.median_us

    @property
    def low_high(self) -> tuple[float, float]:
        """The slowest and fastest round against the median (-0.04, +0.06)."""
        median = self.median_us
        return min(self.us_per_request) / median - 1, max(self.us_per_request) / median - 1

    def resolves(self, difference: float) -> bool:
        """Whether a difference between two runs' figures (0.1: 10%) is larger than this run's own drift."""
        return abs(difference) > 2 * self.spread


def control_drift(summary: RunSummary) -> ControlDrift | None:
    """The control's drift, when the run had a control measured in at least two rounds."""
    record = summary.rounds
    if record is None or record.control is None:
        return None
    config = summary.config(record.control.key)
    if config is None:
        return None
    by_round: dict[int, Step] = {}
    for step in config.steps:
        if step.control and step.cpu_per_request_us is not None:
            by_round.setdefault(step.round, step)
    if len(by_round) < 2:
        return None
    rounds = tuple(sorted(by_round))
    costs = tuple(by_round[r].cpu_per_request_us or 0.0 for r in rounds)
    steals = [s.steal_share for c in summary.configs for s in c.steps if s.steal_share is not None]
    return ControlDrift(config.label, record.control.offered, costs, rounds, max(steals) if steals else None)


def _points(config: ConfigResult, threshold: float) -> list[RoundPoint]:
    return [RoundPoint(s.round, s.rps, s.cpu_utilization_mean) for s in fit_windows(config.steps, threshold)]


def _knee_in(points: Sequence[RoundPoint], rounds: Sequence[int], threshold: float) -> float | None:
    chosen = set(rounds)
    fit = rounds_fit([p for p in points if p.round in chosen])
    return fit.rps_at(threshold) if fit is not None and fit.exponent > 0 else None


def _from_rounds(config: ConfigResult) -> bool:
    """Its knee stands on the rounds fit, with an interval: a knee the fit could not give (its windows did not
    reach the threshold in enough rounds, so a fit would reach far past them) pairs with nothing."""
    knee = config.knee
    return knee is not None and knee.method == "rounds" and knee.interval is not None


def knee_ratio(a: ConfigResult, b: ConfigResult, threshold: float) -> Estimate | None:
    """knee(a) / knee(b) from the rounds both were measured in, with its interval; None without three such
    rounds, when either knee is not the rounds fit's, or when a configuration's windows cannot be fitted
    without one of them."""
    if not (_from_rounds(a) and _from_rounds(b)):
        return None
    points_a, points_b = _points(a, threshold), _points(b, threshold)
    rounds = sorted({p.round for p in points_a} & {p.round for p in points_b})

    def ratio(selected: Sequence[int]) -> float | None:
        knee_a, knee_b = _knee_in(points_a, selected, threshold), _knee_in(points_b, selected, threshold)
        return knee_a / knee_b if knee_a and knee_b else None

    return jackknife(rounds, ratio)


def connection_cost(new: ConfigResult, kept: ConfigResult, threshold: float, connections: float) -> Estimate | None:
    """Envoy's CPU per new connection in microseconds: what a request of `new` (a connection per request) costs
    at its knee over what one of `kept` (its keep-alive twin, the same limit) costs at its own, per connection
    `new` opened per request; both knees from the rounds both were measured in, with the jackknife interval
    over those rounds. None as for knee_ratio, or when a connection costs nothing measurable."""
    if not (_from_rounds(new) and _from_rounds(kept)) or connections <= 0:
        return None
    points_new, points_kept = _points(new, threshold), _points(kept, threshold)
    rounds = sorted({p.round for p in points_new} & {p.round for p in points_kept})
    cores_us = threshold * new.envoy.cpu_cores * 1e6  # a knee's CPU per request is this / the knee

    def cost(selected: Sequence[int]) -> float | None:
        knee_new, knee_kept = _knee_in(points_new, selected, threshold), _knee_in(points_kept, selected, threshold)
        return cores_us * (1 / knee_new - 1 / knee_kept) / connections if knee_new and knee_kept else None

    return jackknife(rounds, cost)


def per_core_ratio(a: ConfigResult, b: ConfigResult, threshold: float) -> Estimate | None:
    """(knee per core of a) / (knee per core of b): 1.0 when RPS grows in proportion to the CPU limit."""
    ratio = knee_ratio(a, b, threshold)
    if ratio is None:
        return None
    scale = b.envoy.cpu_cores / a.envoy.cpu_cores
    return Estimate(ratio.value * scale, ratio.low * scale, ratio.high * scale, ratio.rounds)


@dataclass(frozen=True)
class Growth:
    """knee = c x cores^exponent over the CPU limits measured, the exponent with its interval over rounds:
    1.0 is proportional, above 1 each added core serves more than the one before."""

    exponent: Estimate
    limits: tuple[float, ...]


def growth(configs: Sequence[ConfigResult], threshold: float) -> Growth | None:
    """How the knee grows with the CPU limit, over three or more limits of one profile and arrival model."""
    if len({c.envoy.cpu_cores for c in configs}) < 3 or not all(_from_rounds(c) for c in configs):
        return None
    points = {c.key: _points(c, threshold) for c in configs}
    rounds = sorted(set.intersection(*({p.round for p in pts} for pts in points.values())))

    def slope(selected: Sequence[int]) -> float | None:
        pairs = []
        for config in configs:
            knee = _knee_in(points[config.key], selected, threshold)
            if knee is None:
                return None
            pairs.append((math.log(config.envoy.cpu_cores), math.log(knee)))
        xs, ys = zip(*pairs, strict=True)
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mean_x) ** 2 for x in xs)
        value = sum((x - mean_x) * (y - mean_y) for x, y in pairs) / sxx if sxx > 0 else None
        return value if value is not None and value > 0 else None

    exponent = jackknife(rounds, slope)
    if exponent is None:
        return None
    return Growth(exponent, tuple(sorted(c.envoy.cpu_cores for c in configs)))


def added_us_per_request(steps: Sequence[Step]) -> float:
    """Envoy's CPU one more request per second adds (microseconds), from the lowest and the highest window: the
    slope between them, in which Envoy's CPU with no load (stats, timers, scrapes), the same at both, cancels."""
    low, high = min(steps, key=lambda s: s.envoy_rps), max(steps, key=lambda s: s.envoy_rps)
    return 1e6 * (high.envoy_cpu_cores - low.envoy_cpu_cores) / (high.envoy_rps - low.envoy_rps)

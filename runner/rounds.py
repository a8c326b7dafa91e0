"""Interleaved rounds: the order in which a sweep visits its configurations, and where a visit's windows go.

A virtual machine's speed drifts by tens of percent within minutes, so a configuration measured from start
to end and then the next one compare two machines. Interleaved trials cancel that (Abedi & Brecht, ICPE
2017): the sweep runs R rounds, each visiting every configuration once in an order shuffled by a recorded
seed, and every figure comes from all rounds with an interval from the scatter between them.

- Round 1 locates each configuration's knee: the adaptive search, stopped once a window below the threshold
  and one at it bracket the knee (runner.search).
- Later rounds place `windows_per_round` windows over the curve from what the earlier rounds found: one low on
  it (LEVER_UTILIZATION, the lever arm that fixes the curve's exponent) and one near the threshold (alternating
  between NEAR_UTILIZATIONS, so a round's intercept is read where the knee is), more spread between them; and
  a capacity probe while the rate where Envoy breaks is not yet bracketed.
- The control window: the first configuration at one fixed rate (where round 1 put CONTROL_UTILIZATION), in
  every round. Its CPU per request across rounds is the machine's own drift during the run.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from runner.knee import SATURATED, find_capacity, find_knee, fit_windows, power_fit, served_in_full, window_points
from runner.model import Step
from runner.scenario import MAX_SEED
from runner.search import EXPONENT_BOUNDS, EXPONENT_PRIOR, MIN_SIGNAL, AdaptiveSearch

LEVER_UTILIZATION = 0.72  # just inside the fitted range (knee.LOCAL_FLOOR of the threshold)
NEAR_UTILIZATIONS = (0.86, 0.93)  # either side of the threshold by turns; a window past SATURATED fits nothing
CONTROL_UTILIZATION = 0.72  # the control is the control configuration's lever window
MIN_LEVER = 1.3  # a round's highest curve window offers at least this much more than its lowest
MAX_PLANNED_GROWTH = 1.5  # a planned window offers at most this much more than the most any window served
MIN_PLANNED_SHARE = 0.25  # ... and at least this share of the least any window was offered
MAX_CAPACITY_PROBES = 3  # capacity probes per configuration after the first round (each a window past the knee)
RETRY_SHARE = 0.85  # a curve window past the curve is measured again at this share of its load
BRACKET_STEP = 0.08  # a planned window that would reach past every window that crossed aims this far below


def seed_for(run_id: str) -> int:
    """The rounds' seed when the scenario sets none: a hash of the run id (recorded with the run)."""
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) & MAX_SEED


def round_order(keys: Sequence[str], seed: int, round_: int) -> list[str]:
    """The configurations' order in `round_`: a shuffle drawn from (seed, round), the same on a resume."""
    return random.Random(f"{seed}:{round_}").sample(list(keys), len(keys))


@dataclass(frozen=True)
class VisitPlan:
    """A round's windows at one configuration: offered loads on the curve (low to high), the capacity probe
    (None: capacity is bracketed, or closed loop) and the control window's load when this is the control."""

    curve: list[float]
    probe: float | None = None
    control: float | None = None


def past_the_curve(step: Step) -> bool:
    """A window the fit cannot use: saturated, or short of its offered rate. A curve window like that is
    measured again lower (RETRY_SHARE), once."""
    return step.cpu_utilization_mean >= SATURATED or not served_in_full(step)


class VisitPlanner:
    """Where one configuration's windows go in a round after the first, from its windows so far."""

    def __init__(self, search: AdaptiveSearch, windows: int) -> None:
        self.search = search
        self.windows = windows

    @property
    def threshold(self) -> float:
        return self.search.threshold

    def utilizations(self, round_: int) -> list[float]:
        """The utilizations this round's windows aim at, low to high."""
        near = NEAR_UTILIZATIONS[round_ % len(NEAR_UTILIZATIONS)]
        if self.windows == 1:
            return [near]
        step = (near - LEVER_UTILIZATION) / (self.windows - 1)
        return [LEVER_UTILIZATION + i * step for i in range(self.windows)]

    def offered_for(self, steps: Sequence[Step], utilization: float) -> float | None:
        """The load at which Envoy's utilization should be `utilization`: the run's curve where it has one,
        else a power law through the steady windows (the prior exponent when they cannot fix one)."""
        useful = [s for s in fit_windows(steps, self.threshold) if s.cpu_utilization_mean >= MIN_SIGNAL] or [
            s for s in steps if not s.guards and s.rps > 0 and s.cpu_utilization_mean >= MIN_SIGNAL
            and s.regime != "throttled"
        ]  # fmt: skip
        if not useful:
            return None
        anchor = min(useful, key=lambda s: abs(math.log(s.cpu_utilization_mean / utilization)))
        fit = find_knee(steps, self.threshold).fit
        if fit is not None and fit.exponent > 0:
            rps = fit.rps_at(utilization)
        else:
            one = power_fit(window_points(useful))
            exponent = min(max(one.exponent, EXPONENT_BOUNDS[0]), EXPONENT_BOUNDS[1]) if one else EXPONENT_PRIOR
            rps = anchor.rps * (utilization / anchor.cpu_utilization_mean) ** (1 / exponent)
        rps = self._bracketed(steps, utilization, rps)
        served = max(s.rps for s in steps)
        least = min(s.offered for s in steps)
        rps = min(max(rps, MIN_PLANNED_SHARE * least), MAX_PLANNED_GROWTH * served)
        if self.search.maker.mode == "users":
            return float(max(1, round(anchor.users * rps / anchor.rps)))
        return rps

    @staticmethod
    def _bracketed(steps: Sequence[Step], utilization: float, rps: float) -> float:
        """`rps`, moved inside what the windows already show: below the lowest rate that reached
        `utilization` and above the highest that stayed clean below it. A curve fitted to a few windows
        can aim far past the threshold, and windows past it (saturated, throttled) never correct the fit."""
        reached = [s.rps for s in steps if s.cpu_utilization_mean >= utilization]
        under = [s.rps for s in steps if s.cpu_utilization_mean < utilization and not s.guards
                 and s.regime != "throttled"]  # fmt: skip
        high = min(reached, default=math.inf)
        low = max((r for r in under if r < high), default=0.0)
        if rps >= high:
            return math.sqrt(low * high) if low > 0 else high * (1 - BRACKET_STEP)
        if rps <= low and high < math.inf:
            return math.sqrt(low * high)
        return rps

    def plan(self, steps: Sequence[Step], round_: int, control: float | None = None) -> VisitPlan | None:
        """This round's visit: the curve's windows low to high (`control` replaces the lowest: the control
        configuration) and a capacity probe. None while the windows do not yet bracket a knee: locate again."""
        result = find_knee(steps, self.threshold)
        if result.knee is None:
            return None
        levels = [offered for u in self.utilizations(round_) if (offered := self.offered_for(steps, u)) is not None]
        if control is not None:
            levels = [control, *levels[1:]] if len(levels) > 1 else [control, *levels]
        levels = sorted(levels)
        if len(levels) > 1 and levels[-1] < MIN_LEVER * levels[0]:  # a fit gone flat: keep the lever arm
            levels[-1] = MIN_LEVER * levels[0]
        probes = sum(1 for s in steps if s.probe)
        probe = self.capacity_probe(steps) if probes < MAX_CAPACITY_PROBES else None
        return VisitPlan(levels, probe, control)

    def capacity_probe(self, steps: Sequence[Step]) -> float | None:
        """A load above the knee while capacity is not bracketed to its resolution (open loop only)."""
        result = find_knee(steps, self.threshold)
        if result.knee is None:
            return None
        capacity = find_capacity(steps, self.search.targets.latency_slo_ms, above=result.knee.rps)
        return self.search.probe_capacity(steps, result, capacity)

"""Interleaved rounds: the order in which a sweep visits its configurations, and where a visit's windows go.

A virtual machine's speed drifts by tens of percent within minutes, so a configuration measured from start
to end and then the next one compare two machines. Interleaved trials cancel that (Abedi & Brecht, ICPE
2017): the sweep runs R rounds, each visiting every configuration once in an order shuffled by a recorded
seed, and every figure comes from all rounds with an interval from the scatter between them.

- Round 1 locates each configuration's knee: the adaptive search, stopped once a window below the threshold
  and one at it bracket the knee (runner.search).
- Later rounds place `windows_per_round` windows over the curve. The first goes where the run's curve puts
  LEVER_UTILIZATION (the lever arm that fixes the curve's exponent), or is the control window. What it reads
  is this round's curve: the machine may have changed speed since the last round, so the other windows are
  placed from that reading and the run's exponent, one near the threshold (alternating between
  NEAR_UTILIZATIONS) and more spread between; below the first when it already reads near the threshold.
  Then a capacity probe while the rate where Envoy breaks is not yet bracketed.
- Every visit of a run in rounds, the first round's too, ends with a window the rounds fit can use (between
  knee.ROUNDS_FLOOR of the threshold and SATURATED, served in full): when all of its windows missed that band
  (the machine sped up or slowed down since the last round), up to MAX_RESCUES more are placed from them. A
  round without one would leave the knee standing on the other rounds, its interval on fewer.
- The control window: the first configuration at one fixed rate (where round 1 put CONTROL_UTILIZATION), in
  every round. Its CPU per request across rounds is the machine's own drift during the run.
- How many rounds a configuration gets (`RoundsPolicy`): the planned ones, then more up to load.max_rounds while
  its knee's interval is wider than load.knee_interval and the run's time allows (more_rounds_within_seconds).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.capacity import find_capacity
from runner.knee import (
    ROUNDS_FLOOR,
    SATURATED,
    find_knee,
    fit_windows,
    fits,
    power_fit,
    served_in_full,
    window_points,
)
from runner.model import RoundsRecord, Step
from runner.scenario import MAX_SEED, LoadSpec
from runner.search import EXPONENT_BOUNDS, EXPONENT_PRIOR, MIN_SIGNAL, AdaptiveSearch

if TYPE_CHECKING:
    from runner.assess import Assessment

LEVER_UTILIZATION = 0.72  # just inside the fitted range (knee.LOCAL_FLOOR of the threshold)
NEAR_UTILIZATIONS = (0.86, 0.93)  # either side of the threshold by turns; a window past SATURATED fits nothing
CONTROL_UTILIZATION = 0.72  # the control is the control configuration's lever window
MIN_GAP = 0.12  # a round's windows read at least this far apart in utilization (the lever arm) ...
MAX_AIM = 0.94  # ... none aiming higher than this (past SATURATED a window fits nothing) ...
MIN_AIM = 0.64  # ... nor lower than this (knee.ROUNDS_FLOOR of the threshold is 0.6)
PLACING_EXPONENT = (0.6, 1.1)  # Envoy's cost per request falls a little with load (0.8-0.9 measured): a fit
# outside these is drift between a round's windows taken for a slope, and would throw a window far off
MAX_PLANNED_GROWTH = 1.5  # a planned window offers at most this much more than the most any window served
MIN_PLANNED_SHARE = 0.25  # ... and at least this share of the least any window was offered
MAX_CAPACITY_PROBES = 3  # capacity probes per configuration after the first round (each a window past the knee)
RETRY_SHARE = 0.85  # a curve window past the curve is measured again at this share of its load
BRACKET_STEP = 0.08  # a planned window that would reach past every window that crossed aims this far below
RESCUE_UTILIZATION = 0.8  # a visit none of whose windows the rounds fit can use gets one more aimed here ...
MAX_RESCUES = 2  # ... at most this many times


def seed_for(run_id: str) -> int:
    """The rounds' seed when the scenario sets none: a hash of the run id (recorded with the run)."""
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) & MAX_SEED


def round_order(keys: Sequence[str], seed: int, round_: int) -> list[str]:
    """The configurations' order in `round_`: a shuffle drawn from (seed, round), the same on a resume."""
    return random.Random(f"{seed}:{round_}").sample(list(keys), len(keys))


@dataclass(frozen=True, kw_only=True)
class RoundsPolicy:
    """How many rounds a configuration gets: `planned`, then more up to `most` while its knee's interval is
    wider than `knee_interval`, each only while the run has taken less than `more_within_s` (None: no bound).
    `adaptive`: the scenario's search is the adaptive one (a schedule is measured whole in every round)."""

    planned: int
    most: int
    knee_interval: float
    more_within_s: float | None = None
    adaptive: bool = True

    @classmethod
    def of(cls, record: RoundsRecord, load: LoadSpec) -> RoundsPolicy:
        """The policy of a run: its counts as recorded (kept from the first attempt on a resume), the rest from
        the scenario's load section."""
        return cls(
            planned=record.planned,
            most=record.max_rounds,
            knee_interval=load.knee_interval,
            more_within_s=load.more_rounds_within_s,
            adaptive=load.search == "adaptive",
        )

    @property
    def in_rounds(self) -> bool:
        """The run measures in interleaved rounds: round 1 only locates each knee, the rounds fit sets it."""
        return self.most > 1

    @property
    def places_windows(self) -> bool:
        """Rounds after the first place their windows over the curve (VisitPlanner), and every visit ends with a
        window the rounds fit can use: rounds with the adaptive search."""
        return self.in_rounds and self.adaptive

    def order(self, keys: Sequence[str], seed: int, round_: int) -> list[str]:
        """The configurations' order in `round_`: the plan's with one round planned, else shuffled (round_order)."""
        return list(keys) if self.planned == 1 else round_order(keys, seed, round_)

    def within_target(self, assessment: Assessment) -> bool:
        """The knee has an interval within the target."""
        knee = assessment.knee
        width = knee.half_width if knee is not None else None
        return width is not None and width <= self.knee_interval

    def last_round(self, assessment: Assessment, round_: int) -> bool:
        """The configuration's last round: the planned ones are done and its knee's interval is within the
        target, or the most rounds allowed are done (a knee still without an interval gets rounds up to then)."""
        if round_ >= self.most:
            return True
        return round_ >= self.planned and self.within_target(assessment)

    def out_of_rounds(self, assessment: Assessment, round_: int, spent_s: float, elapsed_s: float) -> str | None:
        """Why a configuration past its planned rounds, its knee still wider than the target, gets no more: the
        most rounds are done, or the next visit (as long as its visits took on average, `spent_s` over `round_`)
        would start after `more_within_s` of the run (`elapsed_s` so far). None otherwise."""
        if self.most == self.planned or round_ < self.planned or self.within_target(assessment):
            return None
        if round_ >= self.most:
            return f"the most rounds done (load.max_rounds: {self.most})"
        budget = self.more_within_s
        if budget is not None and elapsed_s + spent_s / round_ > budget:
            return f"no time for round {round_ + 1} (load.more_rounds_within_seconds: {budget:g})"
        return None


@dataclass(frozen=True)
class VisitPlan:
    """A round's windows at one configuration: the first window's offered load (the control's when `control`),
    how many windows follow it, placed from what it reads (VisitPlanner.aims, .place), and the capacity probe
    (None: capacity is bracketed, or closed loop)."""

    first: float
    later: int
    probe: float | None = None
    control: bool = False


def past_the_curve(step: Step, floor: float) -> bool:
    """A window past the top of the curve: saturated, or short of its offered rate at `floor` or more (the band
    of the rounds fit). A curve window like that is measured again lower (RETRY_SHARE), once. Under the band a
    short window is the generator's hiccup (a window at 33% delivered 97.8% of its rate), not Envoy's limit:
    measuring lower would move away from the band."""
    return step.cpu_utilization_mean >= SATURATED or (step.cpu_utilization_mean >= floor and not served_in_full(step))


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
        clean = [s for s in steps if not s.guards and s.rps > 0 and s.cpu_utilization_mean >= MIN_SIGNAL]
        useful = (
            [s for s in fit_windows(steps, self.threshold) if s.cpu_utilization_mean >= MIN_SIGNAL]
            or [s for s in clean if s.regime != "throttled"]
            or clean  # a quota throttles bursts at any load: 20% of periods at 40% (a 250m run, 2026-11-26)
        )
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
        under = [
            s.rps for s in steps if s.cpu_utilization_mean < utilization and not s.guards and s.regime != "throttled"
        ]
        high = min(reached, default=math.inf)
        low = max((r for r in under if r < high), default=0.0)
        if rps >= high:
            return math.sqrt(low * high) if low > 0 else high * (1 - BRACKET_STEP)
        if rps <= low and high < math.inf:
            return math.sqrt(low * high)
        return rps

    def plan(self, steps: Sequence[Step], round_: int, control: float | None = None) -> VisitPlan | None:
        """This round's visit: the first window (`control`, the control configuration's, or the lever), how many
        follow it, and a capacity probe. None while the windows do not yet bracket a knee: locate again."""
        if find_knee(steps, self.threshold).knee is None:
            return None
        utilizations = self.utilizations(round_)
        first = control if control is not None else self.offered_for(steps, utilizations[0])
        if first is None:
            return None
        later = len(utilizations) - (0 if control is not None and self.windows == 1 else 1)
        probes = sum(1 for s in steps if s.probe)
        probe = self.capacity_probe(steps) if probes < MAX_CAPACITY_PROBES else None
        return VisitPlan(first, later, probe, control is not None)

    def aims(self, round_: int, reading: float, count: int) -> list[float]:
        """The utilizations of `count` windows after one that read `reading` in this round: up to this round's
        near utilization, at least MIN_GAP above the reading; below it when that would aim past MAX_AIM."""
        top = max(NEAR_UTILIZATIONS[round_ % len(NEAR_UTILIZATIONS)], reading + MIN_GAP)
        if top > MAX_AIM:
            top = max(min(LEVER_UTILIZATION, reading - MIN_GAP), MIN_AIM)
        return [reading + (top - reading) * (i + 1) / count for i in range(count)]

    def place(self, steps: Sequence[Step], reading: Step, utilization: float) -> float:
        """The load at which this round's curve reaches `utilization`: through `reading`, a window of this
        round, with the run's exponent (the machine's speed moves the curve up or down, not its shape)."""
        fit = find_knee(steps, self.threshold).fit
        exponent = fit.exponent if fit is not None and fit.exponent > 0 else EXPONENT_PRIOR
        exponent = min(max(exponent, PLACING_EXPONENT[0]), PLACING_EXPONENT[1])
        rps = reading.rps * (utilization / max(reading.cpu_utilization_mean, MIN_SIGNAL)) ** (1 / exponent)
        least, most = MIN_PLANNED_SHARE * min(s.offered for s in steps), MAX_PLANNED_GROWTH * max(s.rps for s in steps)
        rps = min(max(rps, least), most)
        if self.search.maker.mode == "users":
            return float(max(1, round(reading.users * rps / reading.rps)))
        return rps

    def past_the_curve(self, step: Step) -> bool:
        """past_the_curve with the band of this planner's threshold."""
        return past_the_curve(step, ROUNDS_FLOOR * self.threshold)

    def in_band(self, step: Step) -> bool:
        """Whether the rounds fit can use `step` (knee.fit_windows of windows from several rounds)."""
        return fits(step, ROUNDS_FLOOR * self.threshold)

    def rescue(self, steps: Sequence[Step], visit: Sequence[Step]) -> float | None:
        """The load of one more window for a visit whose windows (`visit`, the latest of `steps`) the rounds
        fit cannot use: placed at RESCUE_UTILIZATION from this round's windows, above the most loaded one
        under the band and below the least loaded one past the curve in or above it (halfway between them,
        geometrically, when the curve points outside). None when one of them fits, or none says where to go."""
        if any(self.in_band(s) for s in visit):
            return None
        floor = ROUNDS_FLOOR * self.threshold  # under it even a window short of its rate bounds nothing from above
        under = [s for s in visit if not s.guards and s.rps > 0 and MIN_SIGNAL <= s.cpu_utilization_mean < floor]
        over = [s for s in visit if past_the_curve(s, floor) and s.rps > 0]
        low = max(under, key=lambda s: s.offered) if under else None
        high = min(over, key=lambda s: s.offered) if over else None
        anchor = low if low is not None else high
        if anchor is None:
            return None
        load = self.place(steps, anchor, RESCUE_UTILIZATION)
        if high is not None:
            load = min(load, high.offered * RETRY_SHARE)
        if low is not None and high is not None and not low.offered < load < high.offered:
            load = math.sqrt(low.offered * high.offered)
        return load

    @staticmethod
    def retry(offered: float, reading: Step | None) -> float:
        """The load to measure again at after a window at `offered` went past the curve: RETRY_SHARE of it,
        or halfway (geometrically) to this round's reading below it when that is lower."""
        again = offered * RETRY_SHARE
        if reading is not None and reading.offered < again:
            return math.sqrt(reading.offered * offered)
        return again

    def capacity_probe(self, steps: Sequence[Step]) -> float | None:
        """A load above the knee while capacity is not bracketed to its resolution (open loop only)."""
        result = find_knee(steps, self.threshold)
        if result.knee is None:
            return None
        capacity = find_capacity(steps, self.search.targets.latency_slo_ms)
        return self.search.probe_capacity(steps, result, capacity)

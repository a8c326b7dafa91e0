"""How the load is stepped within a configuration: a fixed ramp, or an adaptive knee search.

The adaptive search follows Nighthawk's adaptive load controller (grow, then narrow down on a
threshold) but uses what is known of Envoy: below its limit, utilization grows linearly with RPS. So it
predicts the threshold's RPS from the steps so far (secant), grows at most `MAX_GROWTH`x per step, and
stops once the threshold is bracketed with a step within `tolerance` of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runner.knee import bracket
from runner.measure import LoadLevel, Step
from runner.scenario import LoadSpec

MAX_GROWTH = 4.0
FALLBACK_GROWTH = 2.0
SHRINK = 0.25
TOLERANCE = 0.02
# Near saturation utilization can climb faster than the load (a 1.4% step moved it from 84% to 94% at
# 150m): a bracket this narrow in offered load pins the knee's RPS even when no step lands in the band.
LOAD_TOLERANCE = 0.02
AIM_ABOVE = 0.5  # aim at threshold + AIM_ABOVE * tolerance, so a miss still brackets quickly
MIN_SIGNAL = 0.05  # below this utilization a step says little about the slope
MIN_PROGRESS = 0.05  # a prediction less than 5% above the highest load so far is noise: grow instead
EDGE = 0.02  # a secant guess this close to a bracket end (share of its width) is replaced by bisection


class LoadSearch(Protocol):
    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        """The next load level to measure, or None when done."""
        ...


@dataclass(frozen=True)
class LevelMaker:
    """Turns an offered load (users, or target RPS) into a Locust level."""

    mode: str
    max_rps_per_user: float
    min_users: int

    def level(self, offered: float) -> LoadLevel:
        if self.mode == "users":
            return LoadLevel(users=max(1, round(offered)))
        users = max(self.min_users, math.ceil(offered / self.max_rps_per_user))
        return LoadLevel(users=users, user_rps=offered / users)

    def offered(self, step: Step) -> float:
        return float(step.users) if self.mode == "users" else float(step.target_rps or 0.0)


class RampSearch:
    """A fixed schedule; stops after the first step at or above the threshold (unless `to_the_end`,
    the fixed-load mode that measures every level, e.g. for Envoy CPU per 1,000 RPS)."""

    def __init__(
        self, schedule: Sequence[float], maker: LevelMaker, threshold: float, *, to_the_end: bool = False
    ) -> None:
        self.schedule = list(schedule)
        self.maker = maker
        self.threshold = threshold
        self.to_the_end = to_the_end

    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        if not self.to_the_end and steps and steps[-1].cpu_utilization_mean >= self.threshold:
            return None
        if len(steps) >= len(self.schedule):
            return None
        return self.maker.level(self.schedule[len(steps)])


class AdaptiveSearch:
    """Predict-and-bracket search for the load at which utilization reaches the threshold."""

    def __init__(
        self, start: float, maker: LevelMaker, threshold: float, tolerance: float = TOLERANCE, max_steps: int = 12
    ) -> None:
        self.start = start
        self.maker = maker
        self.threshold = threshold
        self.tolerance = tolerance
        self.max_steps = max_steps

    def done(self, steps: Sequence[Step]) -> bool:
        pair = bracket(steps, self.threshold)
        if pair is None:
            return False
        below, above = pair
        closest = min(self.threshold - below.cpu_utilization_mean, above.cpu_utilization_mean - self.threshold)
        if closest <= self.tolerance:
            return True
        low, high = self.maker.offered(below), self.maker.offered(above)
        if self.maker.mode == "rps" and high - low <= LOAD_TOLERANCE * low:
            return True
        return self.maker.mode == "users" and above.users - below.users <= 1  # cannot split a user

    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        if len(steps) >= self.max_steps or self.done(steps):
            return None
        if not steps:
            return self.maker.level(self.start)
        offered = self._next_offered(steps)
        if offered is None:
            return None
        return self.maker.level(offered)

    def _next_offered(self, steps: Sequence[Step]) -> float | None:
        offered = [self.maker.offered(s) for s in steps]
        pair = bracket(steps, self.threshold)
        if pair is not None:
            below, above = pair
            low, high = self.maker.offered(below), self.maker.offered(above)
            guess = _secant(below, above, self.threshold)
            margin = EDGE * (high - low)
            if guess is None or not low + margin < guess < high - margin or _measured(guess, offered):
                guess = (low + high) / 2  # safeguarded secant: bisect when the line says too little
            if self.maker.mode == "users":
                guess = float(min(max(round(guess), low + 1), high - 1))
            return None if _measured(guess, offered) else guess
        if all(s.cpu_utilization_mean >= self.threshold for s in steps):
            lowest = min(offered)
            return lowest * SHRINK if lowest * SHRINK >= (1 if self.maker.mode == "users" else 1.0) else None
        highest = max(offered)
        guess = _predict(steps, self.threshold + AIM_ABOVE * self.tolerance)
        if guess is None:
            guess = highest * MAX_GROWTH  # too little load to say anything yet
        elif guess <= highest * (1 + MIN_PROGRESS):
            guess = highest * FALLBACK_GROWTH
        guess = min(guess, highest * MAX_GROWTH)
        if self.maker.mode == "users":
            guess = float(max(round(guess), int(highest) + 1))
        return guess


def _measured(level: float, offered: Sequence[float]) -> bool:
    return any(math.isclose(level, o, rel_tol=0.01) for o in offered)


def _secant(below: Step, above: Step, threshold: float) -> float | None:
    """Offered load where the line through the bracket's (achieved RPS, utilization) meets the threshold."""
    span = above.cpu_utilization_mean - below.cpu_utilization_mean
    if span <= 0:
        return None
    rps = below.rps + (threshold - below.cpu_utilization_mean) * (above.rps - below.rps) / span
    if below.target_rps is None:  # users mode: scale users by the same proportion
        return below.users * rps / below.rps if below.rps > 0 else None
    return rps


def _predict(steps: Sequence[Step], aim: float) -> float | None:
    """Offered load for utilization `aim`: a line through the two most loaded informative steps, or
    through the origin and the most loaded one when only one says anything."""
    useful = sorted(
        (s for s in steps if s.cpu_utilization_mean >= MIN_SIGNAL and s.rps > 0),
        key=lambda s: s.cpu_utilization_mean,
    )
    if not useful:
        return None
    best = useful[-1]
    slope = best.cpu_utilization_mean / best.rps
    intercept = 0.0
    if len(useful) >= 2 and best.rps > useful[-2].rps:
        other = useful[-2]
        slope = (best.cpu_utilization_mean - other.cpu_utilization_mean) / (best.rps - other.rps)
        intercept = best.cpu_utilization_mean - slope * best.rps
        if slope <= 0:
            return None
    rps = (aim - intercept) / slope
    if best.target_rps is None:  # users mode: scale users by the same proportion
        return best.users * rps / best.rps
    return rps


def make_search(load: LoadSpec, threshold: float) -> LoadSearch:
    """The scenario's search strategy."""
    maker = LevelMaker(mode=load.mode, max_rps_per_user=load.max_rps_per_user, min_users=load.workers)
    if load.search in ("ramp", "fixed"):
        schedule = load.users if load.mode == "users" else (load.rps or ())
        return RampSearch([float(v) for v in schedule], maker, threshold, to_the_end=load.search == "fixed")
    start = float(load.start_users) if load.mode == "users" else load.start_rps
    return AdaptiveSearch(start, maker, threshold, max_steps=load.max_steps)

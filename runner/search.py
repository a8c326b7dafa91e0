"""How the load is stepped within a configuration: a fixed ramp, or an adaptive search for the knee, its
confidence interval and the capacity.

The adaptive search follows Nighthawk's adaptive load controller (grow, then narrow down on a
threshold), in three phases:

1. locate: grow the load, at most MAX_GROWTH x per window, aiming each level at the threshold by a power
   law through the windows so far, until a window reaches the threshold and one below it does not;
2. refine: measure around the current knee, a little below and a little above it (repeating a level is
   fine), until the knee's 95% confidence interval is within the target (load.knee_interval) or the windows
   set aside for it are spent;
3. capacity: step above the knee until a level breaks (not delivered in full, p99 over the latency SLO),
   then split the gap between the highest served and the lowest broken rate until it is within the
   capacity resolution.

How a configuration's search ended is said once, from its assessment (runner.assess.search_ending).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runner.capacity import find_capacity
from runner.knee import (
    SATURATED,
    KneeResult,
    find_knee,
    fit_windows,
    power_fit,
    window_points,
)
from runner.model import Capacity, LoadLevel, Step
from runner.scenario import LoadSpec

MAX_GROWTH = 4.0
NEAR_GROWTH = ((0.3, 4.0), (0.6, 2.0), (math.inf, 1.5))  # (below this utilization, grow at most this much)
SHRINK = 0.25
AIM_ABOVE = 0.02  # aim a locating window just above the threshold, so a miss still brackets quickly
EXPONENT_PRIOR = 0.85  # utilization ~ RPS^0.85 (Envoy's cost per request falls with load) until a fit says
MIN_SIGNAL = 0.05  # below this utilization a window says little about the slope
MIN_STEP = 0.03  # a locating window offers at least this much more than the highest so far
NEAR_MISS = 0.10  # a locating window this close under the threshold is a near miss: each one makes the next
# window aim AIM_ABOVE and step MIN_STEP further, so a noisy machine cannot keep a search creeping up below it
EXPONENT_BOUNDS = (0.3, 1.2)  # a locating power law outside these is noise from too few windows
REFINE_BELOW = 0.05  # refining windows sit this far below the knee ...
REFINE_ABOVE = 0.02  # ... and this far above it (utilization saturates soon above the knee)
CAPACITY_STEP = 0.08  # without a fit, a capacity probe offers this much more than the highest rate served
CAPACITY_RESERVE = 2  # windows kept back from refining for the capacity
MAX_CAPACITY_JUMP = 1.5  # a capacity probe offers at most this much more than the highest rate served
OUT_OF_ORDER_STEP = 0.15  # windows that cross the threshold only out of order: measure this far below them
HINT_SHARE = 0.6  # start a configuration at this share of the knee another one suggests
MIN_START_RPS = 50.0


class LoadSearch(Protocol):
    """What a visit asks of a search (RampSearch, AdaptiveSearch; make_search picks one): the windows it steps
    from, and the next level."""

    def windows_read(self, configuration: Sequence[Step], visit: Sequence[Step]) -> Sequence[Step]:
        """The windows the next level follows from: all of the configuration's, or this visit's alone."""
        ...

    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        """The next load level to measure after `steps`, or None when done."""
        ...


@dataclass(frozen=True)
class LevelMaker:
    """Turns an offered load (users, or target RPS) into a Locust level."""

    mode: str
    max_rps_per_user: float
    min_users: int

    @classmethod
    def from_load(cls, load: LoadSpec) -> LevelMaker:
        """The scenario's: its mode, its users' highest rate, at least one user per worker."""
        return cls(mode=load.mode, max_rps_per_user=load.max_rps_per_user, min_users=load.workers)

    def level(self, offered: float) -> LoadLevel:
        if self.mode == "users":
            return LoadLevel(users=max(1, round(offered)))
        users = max(self.min_users, math.ceil(offered / self.max_rps_per_user))
        return LoadLevel(users=users, user_rps=offered / users)


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

    def windows_read(self, configuration: Sequence[Step], visit: Sequence[Step]) -> Sequence[Step]:
        """This visit's: the whole schedule is measured in every round."""
        return visit

    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        if not self.to_the_end and steps and steps[-1].cpu_utilization_mean >= self.threshold:
            return None
        if len(steps) >= len(self.schedule):
            return None
        return self.maker.level(self.schedule[len(steps)])


@dataclass(frozen=True)
class Targets:
    """When the adaptive search is done: the knee's interval half-width (0.03 = +-3%), the capacity's
    resolution, the latency SLO that breaks capacity, and the most windows a configuration may take. The
    defaults are the search's own (tests drive it alone); a sweep's come from its scenario (from_load)."""

    interval: float = 0.03
    capacity_resolution: float = 0.05
    latency_slo_ms: float = 250.0
    max_steps: int = 12

    @classmethod
    def from_load(cls, load: LoadSpec, windows_before: int = 0) -> Targets:
        """A scenario's targets (its knee_interval, 0.08 by default); the window budget counted on top of
        `windows_before`."""
        return cls(load.knee_interval, load.capacity_resolution, load.latency_slo_ms, windows_before + load.max_steps)


class AdaptiveSearch:
    """Locate the knee, refine its interval, then bracket the capacity (see the module's docstring)."""

    def __init__(
        self,
        start: float,
        maker: LevelMaker,
        threshold: float,
        targets: Targets = Targets(),
        *,
        locate_only: bool = False,
    ) -> None:
        self.start = start
        self.maker = maker
        self.threshold = threshold
        self.targets = targets
        self.locate_only = locate_only  # stop once the windows bracket a knee (the first of several rounds)

    def windows_read(self, configuration: Sequence[Step], visit: Sequence[Step]) -> Sequence[Step]:
        """The configuration's, from every round: the search goes on from where the knee stands."""
        return configuration

    # -- the phases -------------------------------------------------------------------------------
    def next_level(self, steps: Sequence[Step]) -> LoadLevel | None:
        if len(steps) >= self.targets.max_steps:
            return None
        if not steps:
            return self.maker.level(self.start)
        offered = self._next_offered(steps)
        if offered is None:
            return None
        return self.maker.level(min(offered, MAX_GROWTH * max(s.offered for s in steps)))

    def _next_offered(self, steps: Sequence[Step]) -> float | None:
        result = find_knee(steps, self.threshold)
        if result.knee is None:
            return self._locate(steps)
        if self.locate_only:
            return None
        if self.maker.mode == "users":
            return self._bisect_users(result.bracket) if result.bracket is not None else None
        capacity = find_capacity(steps, self.targets.latency_slo_ms)
        if not self.knee_settled(result) and len(steps) < self.targets.max_steps - CAPACITY_RESERVE:
            return self._refine(steps, result, capacity)
        return self.probe_capacity(steps, result, capacity)

    def _locate(self, steps: Sequence[Step]) -> float | None:
        """No bracket yet: shrink when everything is past the threshold; below the windows when they cross it
        only out of order; else aim at it."""
        offered = [s.offered for s in steps]
        reached = [s.offered for s in steps if s.cpu_utilization_mean >= self.threshold]
        if len(reached) == len(steps):
            lowest = min(offered) * SHRINK
            return lowest if lowest >= (1 if self.maker.mode == "users" else 1.0) else None
        if reached:
            # every window under the threshold offered more than one that reached it: near the knee the noise
            # is larger than the steps, and aiming higher again would only measure more saturated windows
            below = min(reached) * (1 - OUT_OF_ORDER_STEP)
            if self.maker.mode == "users":
                below = float(min(round(below), int(min(reached)) - 1))
            return below if below >= 1 else None
        highest = max(offered)
        misses = self._near_misses(steps)
        guess = self._predict(steps, misses)
        if guess is None:
            guess = highest * MAX_GROWTH  # too little load to say anything yet
        busiest = max(s.cpu_utilization_mean for s in steps)
        growth = next(limit for below, limit in NEAR_GROWTH if busiest < below)  # a flat fit aims far too high
        step = MIN_STEP * (1 + misses)
        guess = min(max(guess, highest * (1 + step)), highest * growth)
        if self.maker.mode == "users":
            guess = float(max(round(guess), int(highest) + 1))
        return guess

    def _predict(self, steps: Sequence[Step], near_misses: int = 0) -> float | None:
        """Offered load for a utilization just above the threshold (further above after `near_misses`): a power
        law through the informative windows (proportional through the origin when only one says anything)."""
        useful = [s for s in steps if s.cpu_utilization_mean >= MIN_SIGNAL and s.rps > 0 and not s.guards]
        if not useful:
            return None
        aim = self.threshold + AIM_ABOVE * (1 + near_misses)
        best = max(useful, key=lambda s: s.cpu_utilization_mean)
        exponent = EXPONENT_PRIOR
        fit = power_fit(window_points(useful))
        if fit is not None:
            exponent = min(max(fit.exponent, EXPONENT_BOUNDS[0]), EXPONENT_BOUNDS[1])
        rps = best.rps * (aim / best.cpu_utilization_mean) ** (1 / exponent)
        return best.users * rps / best.rps if best.target_rps is None else rps

    def _near_misses(self, steps: Sequence[Step]) -> int:
        """Windows that stayed under the threshold by less than NEAR_MISS."""
        return sum(1 for s in steps if self.threshold - NEAR_MISS <= s.cpu_utilization_mean < self.threshold)

    def _bisect_users(self, pair: tuple[Step, Step]) -> float | None:
        """Closed loop: halve the bracket in whole users until it cannot be split."""
        below, above = pair
        if above.users - below.users <= 1:
            return None
        return float((below.users + above.users) // 2)

    def knee_settled(self, result: KneeResult) -> bool:
        width = result.knee.half_width if result.knee is not None else None
        return width is not None and width <= self.targets.interval

    def _refine(self, steps: Sequence[Step], result: KneeResult, capacity: Capacity | None) -> float:
        """A window near the knee on the side with fewer fitted windows (below when even)."""
        assert result.knee is not None
        knee = result.knee.rps
        fitted = fit_windows(steps, self.threshold)
        below = sum(1 for s in fitted if s.cpu_utilization_mean < self.threshold)
        above = len(fitted) - below
        upper = knee * (1 + REFINE_ABOVE)
        broken = capacity.broken_at if capacity is not None else None
        saturated_at = min((s.offered for s in steps if s.cpu_utilization_mean >= SATURATED), default=math.inf)
        if above < below and upper < min(broken or math.inf, saturated_at):
            return upper
        return knee * (1 - REFINE_BELOW)

    def probe_capacity(self, steps: Sequence[Step], result: KneeResult, capacity: Capacity | None) -> float | None:
        """Where the fit says Envoy reaches its limit, then either side of it until the highest served and
        the lowest broken rate are within the capacity resolution."""
        if self.maker.mode == "users" or result.knee is None or capacity is None:
            return None  # closed loop, or nothing served within the SLO: no rate to start from
        step = self.targets.capacity_resolution * 0.8
        if capacity.broken_at is None:
            above = max(capacity.rps, result.knee.rps)
            predicted = result.fit.rps_at(1.0) * (1 - step / 2) if result.fit is not None else 0.0
            predicted = min(predicted, above * MAX_CAPACITY_JUMP)
            return (
                predicted
                if predicted > above * (1 + step / 2)
                else above * (1 + (step if result.fit else CAPACITY_STEP))
            )
        if (capacity.resolution or 0.0) <= self.targets.capacity_resolution:
            return None
        if capacity.rps <= result.knee.rps and capacity.broken_at <= result.knee.rps * MAX_CAPACITY_JUMP:
            # broken just past the knee: step down from the break
            return max(capacity.rps * (1 + step / 2), capacity.broken_at * (1 - step))
        return math.sqrt(capacity.rps * capacity.broken_at)


def start_rps(load: LoadSpec, envoy_cpu_cores: float, knee_per_core: float | None = None) -> float:
    """Where the adaptive search starts: the scenario's start_rps; else HINT_SHARE of the knee expected
    from a configuration already measured (`knee_per_core`); else start_rps_per_core x the CPU limit."""
    if load.start_rps is not None:
        return load.start_rps
    if knee_per_core is not None:
        return max(MIN_START_RPS, HINT_SHARE * knee_per_core * envoy_cpu_cores)
    return max(MIN_START_RPS, load.start_rps_per_core * envoy_cpu_cores)


def search_start(load: LoadSpec, envoy_cpu_cores: float = 1.0, knee_per_core: float | None = None) -> float:
    """The adaptive search's first offered load: the scenario's start_users in closed loop, else start_rps."""
    return float(load.start_users) if load.mode == "users" else start_rps(load, envoy_cpu_cores, knee_per_core)


def make_adaptive(
    load: LoadSpec, threshold: float, start: float, *, locate_only: bool = False, windows_before: int = 0
) -> AdaptiveSearch:
    """The adaptive search from `start` (search_start); `locate_only`: it stops once its windows bracket a knee
    (the first of several rounds); `windows_before`: windows the configuration already has (earlier visits, an
    earlier attempt), its budget of load.max_steps counted on top of them."""
    targets = Targets.from_load(load, windows_before)
    return AdaptiveSearch(start, LevelMaker.from_load(load), threshold, targets, locate_only=locate_only)


def make_search(
    load: LoadSpec,
    threshold: float,
    envoy_cpu_cores: float = 1.0,
    knee_per_core: float | None = None,
    *,
    locate_only: bool = False,
    windows_before: int = 0,
) -> LoadSearch:
    """The scenario's search for a configuration at `envoy_cpu_cores`: its schedule (`search: ramp` or `fixed`),
    else the adaptive one, started near the knee per core of a configuration already measured when one is known
    (`knee_per_core`); `locate_only` and `windows_before` as make_adaptive takes them."""
    if load.search in ("ramp", "fixed"):
        schedule = load.users if load.mode == "users" else (load.rps or ())
        return RampSearch(
            [float(v) for v in schedule], LevelMaker.from_load(load), threshold, to_the_end=load.search == "fixed"
        )
    start = search_start(load, envoy_cpu_cores, knee_per_core)
    return make_adaptive(load, threshold, start, locate_only=locate_only, windows_before=windows_before)

"""One visit of the sweep to a configuration: where its windows go (a located knee, this round's placed windows,
a schedule), then for each window hold the level, measure it, judge and save it.

A visit takes what it needs from the sweep as values (`VisitContext`); the sweep is the loop over rounds and
configurations (runner.sweep), the rounds policy says how many rounds a configuration gets (runner.rounds)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.clock import Clock
from runner.driver import LoadDriver
from runner.errors import WindowDiscarded
from runner.guards import GuardContext, check_step
from runner.locust import LocustOptions
from runner.model import ConfigResult, ControlWindow, LoadLevel, RoundsRecord, Step
from runner.observer import SweepObserver
from runner.plan import Configuration
from runner.platforms.base import Platform
from runner.results import RunStore
from runner.rounds import CONTROL_UTILIZATION, MAX_RESCUES, RoundsPolicy, VisitPlan, VisitPlanner
from runner.scenario import LoadSpec
from runner.search import make_adaptive, make_search, search_start

__all__ = ["Visit", "VisitContext"]


@dataclass(frozen=True, kw_only=True)
class VisitContext:
    """What every visit of a run takes from the sweep: the scenario's load section, threshold and scrape
    interval, the rounds policy; the platform (where the load goes), the driver that sets it, the observer told
    of each window and the store that saves it; the clock; `armed` raises unless the load's dead-man switch is
    armed (no load is measured without it)."""

    load: LoadSpec
    threshold: float
    scrape_interval_s: float
    policy: RoundsPolicy
    platform: Platform
    driver: LoadDriver
    observer: SweepObserver
    store: RunStore
    clock: Clock
    armed: Callable[[], None]


class Visit:
    """The windows one round measures at one configuration, in order; `steps` are this visit's.

    `record` is the run's rounds record (its control window is set by the visit that first measures it),
    `spent_s` the time the configuration's earlier visits took (its time budget is load.max_config_s),
    `knee_per_core` another configuration's knee per core to start the search near, and `leads` whether this
    configuration is the first unfinished one in plan order (the one a run's control window is taken at)."""

    def __init__(
        self,
        context: VisitContext,
        config: Configuration,
        result: ConfigResult,
        round_: int,
        *,
        record: RoundsRecord,
        spent_s: float = 0.0,
        knee_per_core: float | None = None,
        leads: bool = False,
    ) -> None:
        self.context, self.config, self.result, self.round, self.record = context, config, result, round_, record
        self.knee_per_core, self.leads = knee_per_core, leads
        load = context.load
        self.meter = context.driver.meter(config.envoy_cpu_cores)
        self.guard_context = GuardContext(
            threshold=context.threshold,
            workers=load.workers,
            profile=config.profile,
            scrape_interval_s=context.scrape_interval_s,
        )
        self.deadline = context.clock.monotonic() + load.max_config_s - spent_s  # the time budget's end
        self.steps: list[Step] = []
        self.warmed = False
        self.planner = (  # later rounds place windows over the curve: rounds with the adaptive search
            VisitPlanner(
                make_adaptive(load, context.threshold, search_start(load, config.fleet_cpu_cores)),
                load.windows_per_round,
            )
            if context.policy.places_windows
            else None
        )

    def run(self) -> str | None:
        """Measure this visit's windows; returns why the configuration stops early, or None. The result records
        what its clients send and the scrape interval its windows are judged with."""
        load = self.context.load
        target = self.context.platform.target(self.config.profile, load)
        self.result.accept_encoding = LocustOptions.from_load(load, target=target).accept_encoding
        self.result.scrape_interval_s = self.guard_context.scrape_interval_s
        stop = self._windows()
        if stop is None and self.planner is not None:
            stop = self._in_band(self.planner)
        return stop if stop is not None else self._new_control()

    def _windows(self) -> str | None:
        """The visit's windows: planned from the curve in a later round, else located (or the schedule)."""
        if self.planner is not None and self.round > 1:
            plan = self.planner.plan(self.result.steps, self.round, self._control())
            if plan is not None:
                return self._planned(plan, self.planner)
        load = self.context.load
        search = make_search(
            load,
            self.context.threshold,
            self.config.fleet_cpu_cores,
            self.knee_per_core,
            locate_only=self.context.policy.in_rounds,
            windows_before=len(self.result.steps),
        )
        while (level := search.next_level(search.windows_read(self.result.steps, self.steps))) is not None:
            if (stop := self.measure(level)) is not None:
                return stop
        return None

    def _in_band(self, planner: VisitPlanner) -> str | None:
        """Up to MAX_RESCUES more windows while none of this visit's is one the rounds fit can use."""
        for _ in range(MAX_RESCUES):
            offered = planner.rescue(self.result.steps, self.steps)
            if offered is None:
                return None
            if (stop := self.measure(planner.search.maker.level(offered))) is not None:
                return stop
        return None

    def _planned(self, plan: VisitPlan, planner: VisitPlanner) -> str | None:
        """A planned visit: the first window, the others placed from what it read (this round's curve), each
        past the curve measured again lower once, then the capacity probe."""
        level = planner.search.maker.level
        if (stop := self.measure(level(plan.first), control=plan.control)) is not None:
            return stop
        if planner.past_the_curve(self.steps[-1]) and (stop := self.measure(level(planner.retry(plan.first, None)))):
            return stop
        reading = self.steps[-1]
        count = plan.later if not planner.past_the_curve(reading) else 0
        if plan.control and count and not planner.in_band(reading):
            count += 1  # a control under the band cannot stand in for the lever: the round needs two in it
        for utilization in planner.aims(self.round, reading.cpu_utilization_mean, count):
            offered = planner.place(self.result.steps, reading, utilization)
            if (stop := self.measure(level(offered))) is not None:
                return stop
            if planner.past_the_curve(self.steps[-1]) and (
                stop := self.measure(level(planner.retry(offered, reading)))
            ):
                return stop
            if not planner.past_the_curve(self.steps[-1]):
                reading = self.steps[-1]
        return self.measure(level(plan.probe), probe=True) if plan.probe is not None else None

    def _control(self) -> float | None:
        """The control window's offered load when this is the control configuration and it is known."""
        control = self.record.control
        return control.offered if control is not None and control.key == self.config.key else None

    def _new_control(self) -> str | None:
        """The control window at the end of a visit that has none this round: in the first round whose windows
        (rescues included) place CONTROL_UTILIZATION, the control configuration is the first one in plan order,
        measured there once now (later rounds plan it first); a later visit of it that had to locate its knee
        again measures it too."""
        if self.planner is None:
            return None
        level, record = self.planner.search.maker.level, self.record
        if record.control is not None:
            measured = any(s.control and s.round == self.round for s in self.result.steps)
            if record.control.key != self.config.key or measured:
                return None
            return self.measure(level(record.control.offered), control=True)
        offered = self.planner.offered_for(self.result.steps, CONTROL_UTILIZATION)
        if offered is None or not self.leads:
            return None
        record.control = ControlWindow(key=self.config.key, offered=offered)
        self.context.store.save()
        return self.measure(level(offered), control=True)

    def measure(self, level: LoadLevel, *, control: bool = False, probe: bool = False) -> str | None:
        """Hold `level` (after the warm-up, on the visit's first window), measure a window and save it;
        returns why the configuration stops (a guard below the threshold: more load cannot help), or None."""
        context, load = self.context, self.context.load
        if context.clock.monotonic() >= self.deadline:
            return f"time budget of {load.max_config_s:g} s per configuration spent"
        target = context.platform.target(self.config.profile, load)
        arrivals, driver = self.config.arrivals, context.driver
        if not self.warmed and load.warmup_s > 0:
            driver.set(level, "warm-up", load.warmup_s, arrivals=arrivals, target=target)
        self.warmed = True
        driver.set(level, "settle", load.settle_s, arrivals=arrivals, target=target)
        context.armed()
        context.observer.load_changed(level, "measure", load.step_s)
        index = len(self.result.steps)
        try:
            step = self.meter.measure(index, level, load.step_s)
        except WindowDiscarded as discarded:  # once: set the load again and measure anew
            driver.users = 0
            driver.set(level, f"{discarded}; again", load.settle_s, arrivals=arrivals, target=target)
            step = self.meter.measure(index, level, load.step_s)
        findings = check_step(step, self.steps, self.guard_context)
        update = {"guards": tuple(findings), "round": self.round, "control": control, "probe": probe}
        step = step.model_copy(update=update)
        self.steps.append(step)
        context.store.add_step(self.result, step)
        context.observer.step_measured(self.config, step)
        if findings and step.cpu_utilization_mean < context.threshold and load.search != "fixed":
            return f"stopped: {findings[0].guard} below the threshold (more load cannot help)"
        return None

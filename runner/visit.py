"""One visit of the sweep to a configuration: hold each load level, measure its window, judge and save it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.errors import WindowDiscarded
from runner.guards import GuardContext, check_step
from runner.measure import StepMeter
from runner.model import ConfigResult, LoadLevel, Step
from runner.plan import Configuration

if TYPE_CHECKING:
    from runner.sweep import Sweep


class Visit:
    """The windows one round measures at one configuration, in order; `steps` are this visit's."""

    def __init__(
        self,
        sweep: Sweep,
        config: Configuration,
        result: ConfigResult,
        round_: int,
        meter: StepMeter,
        context: GuardContext,
        deadline: float,
    ) -> None:
        self.sweep = sweep
        self.config = config
        self.result = result
        self.round = round_
        self.meter = meter
        self.context = context
        self.deadline = deadline  # the clock's monotonic() at which the configuration's time budget is spent
        self.steps: list[Step] = []
        self.warmed = False

    def measure(self, level: LoadLevel, *, control: bool = False, probe: bool = False) -> str | None:
        """Hold `level` (after the warm-up, on the visit's first window), measure a window and save it;
        returns why the configuration stops (a guard below the threshold: more load cannot help), or None."""
        sweep, load = self.sweep, self.sweep.scenario.load
        if sweep.clock.monotonic() >= self.deadline:
            return f"time budget of {load.max_config_s:g} s per configuration spent"
        target = sweep.platform.target(self.config.profile, load)
        arrivals = self.config.arrivals
        if not self.warmed and load.warmup_s > 0:
            sweep.driver.set(level, "warm-up", load.warmup_s, arrivals=arrivals, target=target)
        self.warmed = True
        sweep.driver.set(level, "settle", load.settle_s, arrivals=arrivals, target=target)
        if sweep.heartbeat is not None:
            sweep.heartbeat.check()  # no load is measured without the dead-man switch armed
        sweep.observer.load_changed(level, "measure", load.step_s)
        index = len(self.result.steps)
        try:
            step = self.meter.measure(index, level, load.step_s)
        except WindowDiscarded as discarded:  # once: set the load again and measure anew
            sweep.driver.users = 0
            sweep.driver.set(level, f"{discarded}; again", load.settle_s, arrivals=arrivals, target=target)
            step = self.meter.measure(index, level, load.step_s)
        findings = check_step(step, self.steps, self.context)
        update = {"guards": tuple(findings), "round": self.round, "control": control, "probe": probe}
        step = step.model_copy(update=update)
        self.steps.append(step)
        sweep.store.add_step(self.result, step)
        sweep.observer.step_measured(self.config, step)
        if findings and step.cpu_utilization_mean < sweep.scenario.threshold and load.search != "fixed":
            return f"stopped: {findings[0].guard} below the threshold (more load cannot help)"
        return None

"""The sweep engine: for each configuration, apply it, step the load, measure, find the knee, save."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

from runner import environment
from runner.calibrate import Calibration, calibration_level, from_steps, largest
from runner.errors import SizerError, UnreachableError
from runner.guards import GuardContext, check_step, first_finding
from runner.knee import KneeResult, find_knee
from runner.locust import LocustOptions
from runner.measure import LoadLevel, Step, StepMeter
from runner.plan import Configuration, Plan
from runner.platforms.base import Endpoints, Platform
from runner.results import BaselineResult, ConfigResult, RunStore
from runner.scenario import Scenario
from runner.search import make_search

SPAWN_MARGIN_S = 1.0


class SweepObserver(Protocol):
    """What the engine reports as it goes (the console implements it; tests may record it)."""

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None: ...
    def config_started(self, position: int, total: int, config: Configuration) -> None: ...
    def config_skipped(self, config: Configuration, result: ConfigResult) -> None: ...
    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None: ...
    def step_measured(self, config: Configuration, step: Step) -> None: ...
    def config_finished(self, result: ConfigResult) -> None: ...
    def baseline_measured(self, baseline: BaselineResult) -> None: ...


class SilentObserver:
    """Reports nothing."""

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None: ...
    def config_started(self, position: int, total: int, config: Configuration) -> None: ...
    def config_skipped(self, config: Configuration, result: ConfigResult) -> None: ...
    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None: ...
    def step_measured(self, config: Configuration, step: Step) -> None: ...
    def config_finished(self, result: ConfigResult) -> None: ...
    def baseline_measured(self, baseline: BaselineResult) -> None: ...


@dataclass
class Sweep:
    """Runs `plan` on `platform`, saving into `store` as it measures."""

    scenario: Scenario
    plan: Plan
    platform: Platform
    store: RunStore
    observer: SweepObserver = field(default_factory=SilentObserver)
    overrides: dict[str, object] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep

    def run(self) -> None:
        """The whole sweep. Raises on Ctrl-C or a fatal error after saving what was measured."""
        try:
            with self.platform:
                self.platform.metrics.check()
                self.store.set_environment(environment.collect(self.platform.describe(), self.overrides))
                self.observer.run_started(self.store, self.platform.endpoints, self.plan)
                total = len(self.plan)
                for position, config in enumerate(self.plan.configurations, start=1):
                    done = self.store.summary.config(config.key)
                    if done is not None and done.finished:
                        self.observer.config_skipped(config, done)
                        continue
                    self.observer.config_started(position, total, config)
                    self.observer.config_finished(self.run_config(config))
                if self.scenario.baseline.enabled and self.store.summary.baseline is None:
                    self.run_baseline()
        except KeyboardInterrupt:
            self.store.finish("interrupted", "stopped by Ctrl-C or SIGTERM")
            raise
        except SizerError as error:
            self.store.finish("failed", error.one_line())
            raise
        except Exception as error:
            self.store.finish("failed", f"internal error: {type(error).__name__}: {error}")
            raise
        self.store.finish("complete")

    def run_config(self, config: Configuration) -> ConfigResult:
        """Apply one configuration and search for its knee; a platform error fails only this one."""
        result = self.store.begin(config)
        steps: list[Step] = []
        try:
            self.platform.apply(config)
            steps = self._step_load(config, result)
        except UnreachableError as error:  # Prometheus or Locust gone: nothing further can be measured
            result.fail(error.one_line())
            self.store.save()
            raise
        except SizerError as error:
            result.fail(error.one_line())
            self.store.save()
            return result
        finally:
            self._stop_load()
        outcome = find_knee(steps, self.scenario.threshold)
        status, reason = judge(steps, outcome)
        result.finish(outcome, status, reason)
        self.store.save()
        return result

    def run_baseline(self) -> BaselineResult:
        """The scenario's baseline, saved with the run."""
        spec = self.scenario.baseline
        baseline = self.direct_and_through(spec.users, spec.envoy_cpu_for(self.scenario.envoy.cpu_cores))
        self.store.summary.baseline = baseline
        self.store.save()
        self.observer.baseline_measured(baseline)
        return baseline

    def calibrate(self) -> Calibration:
        """Start the platform and measure the generator alone and through Envoy at the largest limit."""
        with self.platform:
            self.platform.metrics.check()
            top = largest(self.plan).envoy_cpu_cores
            measured = self.direct_and_through(calibration_level(self.scenario).users, top)
        return from_steps(self.scenario, Step(**measured.direct), Step(**measured.gateway), top)

    def direct_and_through(self, users: int, envoy_cpu: float) -> BaselineResult:
        """The backend directly, then through the gateway (Envoy at `envoy_cpu`), same closed-loop users."""
        envoy = self.scenario.envoy
        config = Configuration(
            envoy_cpu_cores=envoy_cpu,
            envoy_memory_bytes=max(envoy.memory_bytes),
            envoy_concurrency=envoy.concurrency_for(envoy_cpu),
            backend_replicas=max(self.scenario.backend.replicas),
        )
        self.platform.apply(config)
        meter = self._meter(config)
        level = LoadLevel(users=users)
        measured: dict[str, dict[str, object]] = {}
        endpoints = self.platform.endpoints
        hold = max(self.scenario.load.warmup_s, self.scenario.load.settle_s)
        try:
            for name, host in (("direct", endpoints.backend), ("gateway", endpoints.gateway)):
                self._set_load(level, 0, f"{name}: warm-up", hold, host=host)
                self.observer.load_changed(level, f"{name}: measure", self.scenario.load.step_s)
                measured[name] = meter.measure(0, level, self.scenario.load.step_s).as_dict()
                self._stop_load()
        finally:
            self._stop_load()
        return BaselineResult(users=users, envoy_cpu=envoy_cpu, direct=measured["direct"], gateway=measured["gateway"])

    def _meter(self, config: Configuration) -> StepMeter:
        return StepMeter(
            self.platform.locust,
            self.platform.metrics,
            self.platform.selectors,
            config.envoy_cpu_cores,
            capacities=self.platform.capacities(),
            sleep=self.sleep,
            alive=self.platform.check,
        )

    def _step_load(self, config: Configuration, result: ConfigResult) -> list[Step]:
        load = self.scenario.load
        search = make_search(load, self.scenario.threshold)
        meter = self._meter(config)
        guard_context = GuardContext(threshold=self.scenario.threshold, workers=load.workers)
        deadline = time.monotonic() + load.max_config_s
        steps: list[Step] = []
        level = search.next_level(steps)
        current = 0
        if level is not None and load.warmup_s > 0:
            current = self._set_load(level, current, "warm-up", load.warmup_s)
        while level is not None and time.monotonic() < deadline:
            current = self._set_load(level, current, "settle", load.settle_s)
            self.observer.load_changed(level, "measure", load.step_s)
            step = meter.measure(len(steps), level, load.step_s)
            findings = check_step(step, steps, guard_context)
            step = replace(step, guards=tuple(asdict(f) for f in findings))
            steps.append(step)
            self.store.add_step(result, step)
            self.observer.step_measured(config, step)
            if findings and step.cpu_utilization_mean < self.scenario.threshold and load.search != "fixed":
                break  # more load cannot reach Envoy's limit while something else limits the run
            level = search.next_level(steps)
        return steps

    def _set_load(
        self, level: LoadLevel, current_users: int, phase: str, hold_s: float, host: str | None = None
    ) -> int:
        """Ask Locust for `level` (at the gateway unless `host`), then wait for the spawn and the settle."""
        load = self.scenario.load
        options = LocustOptions.from_load(load, level.user_rps)
        self.platform.locust.swarm(level.users, load.spawn_rate, host or self.platform.endpoints.gateway, options)
        spawn_s = math.ceil(abs(level.users - current_users) / load.spawn_rate) + SPAWN_MARGIN_S
        wait_s = max(hold_s, spawn_s)
        self.observer.load_changed(level, phase, wait_s)
        self.sleep(wait_s)
        self.platform.check()
        return level.users

    def _stop_load(self) -> None:
        with contextlib.suppress(SizerError):
            self.platform.locust.stop()


def judge(steps: list[Step], outcome: KneeResult) -> tuple[str, str | None]:
    """A knee counts only if no guard fired up to it; without a knee, a guard that fired says why."""
    if outcome.knee is not None:
        above = next(s for s in steps if s.index == outcome.knee.above)
        limit = above.target_rps if above.target_rps is not None else float(above.users)
        finding = first_finding(steps, up_to_offered=limit)
        return ("invalid", finding.message) if finding else ("saturated", None)
    finding = first_finding(steps)
    return ("invalid", finding.message) if finding else ("not-saturated", outcome.reason)

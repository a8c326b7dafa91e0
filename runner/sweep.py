"""The sweep engine: for each configuration, apply it, step the load, measure, find the knee, save; then
the memory model's points when the scenario asks for them (runner.memory_sweep)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner import environment
from runner.clock import SYSTEM_CLOCK, Clock
from runner.driver import LoadDriver
from runner.errors import SizerError, WindowDiscarded
from runner.guards import GuardContext, check_step, judge
from runner.knee import find_capacity, find_knee
from runner.live import LiveState
from runner.locust import Heartbeat, LoadTarget
from runner.memory_sweep import MemoryExperiment
from runner.model import BaselineResult, ConfigResult, LoadLevel, RunStatus, Step
from runner.observer import Broadcast, SweepObserver
from runner.plan import Configuration, Plan
from runner.platforms.base import Platform
from runner.results import RunStore, finish_result
from runner.scenario import Scenario
from runner.search import make_search


@dataclass(kw_only=True)
class Sweep:
    """Runs `plan` on `platform`, saving into `store` as it measures."""

    scenario: Scenario
    plan: Plan
    platform: Platform
    store: RunStore
    observer: SweepObserver = field(default_factory=SweepObserver)
    overrides: dict[str, str] = field(default_factory=dict)
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        self.heartbeat: Heartbeat | None = None  # while the platform runs
        self.live = LiveState(self.scenario.threshold, self.scenario.load.latency_slo_ms)
        self.observer = Broadcast(self.observer, self.live)
        self.driver = LoadDriver(
            platform=self.platform, load=self.scenario.load, observer=self.observer, clock=self.clock
        )
        self.memory = None
        if self.scenario.memory is not None:
            self.memory = MemoryExperiment(scenario=self.scenario, platform=self.platform, store=self.store,
                                           driver=self.driver, observer=self.observer, clock=self.clock,
                                           armed=self._armed)  # fmt: skip

    def run(self) -> RunStatus:
        """The whole sweep; returns the run's final status. Raises on Ctrl-C (or SIGTERM, SIGHUP) after
        saving what was measured, and on an error outside any configuration."""
        try:
            with self.platform, Heartbeat(self.platform.locust, self.live.snapshot) as self.heartbeat:
                self.platform.metrics.check()
                self.store.set_environment(environment.collect(self.platform.describe(), self.overrides))
                self.observer.run_started(self.store, self.platform.endpoints, self.plan)
                self._run_configs()
                if self.scenario.baseline.enabled and self.store.summary.baseline is None:
                    self.run_baseline()
                if self.memory is not None:
                    self.memory.run()
        except KeyboardInterrupt as stop:
            self.store.finish("interrupted", f"stopped by {stop or 'SIGINT (Ctrl-C)'}")
            raise
        except SizerError as error:
            self.store.finish("failed", error.one_line())
            raise
        except Exception as error:
            self.store.finish("failed", f"internal error: {type(error).__name__}: {error}")
            raise
        status, reason = self._final_status()
        self.store.finish(status, reason)
        return status

    def _run_configs(self) -> None:
        total = len(self.plan)
        for position, config in enumerate(self.plan.configurations, start=1):
            done = self.store.summary.config(config.key)
            if done is not None and done.finished:
                self.observer.config_skipped(config, done)
                continue
            self.observer.config_started(position, total, config)
            result = self.run_config(config)
            self.observer.config_finished(result)
            if result.status == "failed" and self.scenario.on_failure == "stop":
                return

    def _armed(self) -> None:
        """PlatformError unless a heartbeat has reached the Locust master (see Heartbeat.check)."""
        if self.heartbeat is not None:
            self.heartbeat.check()

    def _final_status(self) -> tuple[RunStatus, str | None]:
        """`complete` only when every planned configuration finished; else `partial` or `failed`."""
        results = [self.store.summary.config(c.key) for c in self.plan.configurations]
        unfinished = [r.label if r else c.label for c, r in zip(self.plan.configurations, results, strict=True)
                      if r is None or not r.finished]  # fmt: skip
        planned = len(results)
        if self.memory is not None:
            unfinished += [f"memory: {label}" for label in self.memory.unfinished()]
            planned += len(self.memory.points)
        if not unfinished:
            return "complete", None
        finished = planned - len(unfinished)
        what = "configuration(s)" if self.memory is None else "configuration(s) and memory point(s)"
        reason = f"{len(unfinished)} of {planned} {what} did not finish: {'; '.join(unfinished)}"
        return ("partial" if finished else "failed"), reason

    def run_config(self, config: Configuration) -> ConfigResult:
        """Apply one configuration and search for its knee; an error fails only this configuration."""
        result = self.store.begin(config)
        steps: list[Step] = []
        ending: str | None = None
        try:
            restarted = self.platform.recover()
            if restarted:
                self.observer.components_restarted(restarted)
            self.platform.apply(config)
            result.machine_speed = self.platform.machine_speed()
            steps, ending = self._step_load(config, result)
        except SizerError as error:
            result.fail(error.one_line())
            self.store.save()
            return result
        finally:
            self.driver.stop()
        outcome = find_knee(steps, self.scenario.threshold)
        status, reason = judge(steps, outcome.judged_up_to, outcome.reason)
        knee = outcome.knee
        capacity = find_capacity(steps, self.scenario.load.latency_slo_ms, above=knee.rps if knee else None)
        finish_result(result, outcome, status, reason, capacity, search=ending)
        self.store.save()
        return result

    def _step_load(self, config: Configuration, result: ConfigResult) -> tuple[list[Step], str]:
        """Step the load as the search asks, measuring and saving each window; returns the steps and how
        the search ended."""
        load = self.scenario.load
        search = make_search(load, self.scenario.threshold, config.envoy_cpu_cores, self._knee_per_core(config))
        meter = self.driver.meter(config.envoy_cpu_cores)
        guard_context = GuardContext(threshold=self.scenario.threshold, workers=load.workers, profile=config.profile,
                                     scrape_interval_s=self.scenario.prometheus.scrape_interval_s)  # fmt: skip
        deadline = self.clock.monotonic() + load.max_config_s
        target = self.platform.target(config.profile, load)
        steps: list[Step] = []
        level = search.next_level(steps)
        if level is not None and load.warmup_s > 0:
            self.driver.set(level, "warm-up", load.warmup_s, arrivals=config.arrivals, target=target)
        while level is not None:
            if self.clock.monotonic() >= deadline:
                return steps, f"time budget of {load.max_config_s:g} s per configuration spent"
            self.driver.set(level, "settle", load.settle_s, arrivals=config.arrivals, target=target)
            if self.heartbeat is not None:
                self.heartbeat.check()  # no load is measured without the dead-man switch armed
            self.observer.load_changed(level, "measure", load.step_s)
            try:
                step = meter.measure(len(steps), level, load.step_s)
            except WindowDiscarded as discarded:  # once: set the load again and measure anew
                self.driver.users = 0
                self.driver.set(level, f"{discarded}; again", load.settle_s, arrivals=config.arrivals, target=target)
                step = meter.measure(len(steps), level, load.step_s)
            findings = check_step(step, steps, guard_context)
            step = step.model_copy(update={"guards": tuple(findings)})
            steps.append(step)
            self.store.add_step(result, step)
            self.observer.step_measured(config, step)
            if findings and step.cpu_utilization_mean < self.scenario.threshold and load.search != "fixed":
                return steps, f"stopped: {findings[0].guard} below the threshold (more load cannot help)"
            level = search.next_level(steps)
        return steps, search.ending(steps)

    def _knee_per_core(self, config: Configuration) -> float | None:
        """RPS per core at the knee of the configurations already measured with the same arrivals and
        traffic profile (a TLS handshake per request costs many times a keep-alive request)."""
        rates = [
            c.valid_knee.rps / c.envoy.cpu_cores
            for c in self.store.summary.configs
            if c.valid_knee is not None and c.arrivals == config.arrivals and c.profile == config.profile
        ]
        return min(rates) if rates else None

    def run_baseline(self) -> BaselineResult:
        """The scenario's baseline, saved with the run."""
        spec = self.scenario.baseline
        baseline = self.direct_and_through(spec.users, spec.envoy_cpu_for(self.scenario.envoy.cpu_cores))
        self.store.summary.baseline = baseline
        self.store.save()
        self.observer.baseline_measured(baseline)
        return baseline

    def direct_and_through(self, users: int, envoy_cpu: float) -> BaselineResult:
        """The backend directly, then through the gateway (Envoy at `envoy_cpu`), same closed-loop users."""
        envoy = self.scenario.envoy
        config = Configuration(
            envoy_cpu_cores=envoy_cpu,
            envoy_memory_bytes=max(envoy.memory_bytes),
            envoy_concurrency=envoy.concurrency_for(envoy_cpu),
            backend_replicas=self.scenario.backend.max_replicas,
            arrivals=self.scenario.load.arrivals[0],
        )
        self.platform.apply(config)
        meter = self.driver.meter(envoy_cpu)
        level = LoadLevel(users=users)
        measured: dict[str, Step] = {}
        endpoints = self.platform.endpoints
        hold = max(self.scenario.load.warmup_s, self.scenario.load.settle_s)
        load = self.scenario.load
        gateway = self.platform.target(config.profile, load)
        direct = LoadTarget(endpoints.backend, load.host_header, load.path)
        try:
            for name, target in (("direct", direct), ("gateway", gateway)):
                self.driver.set(level, f"{name}: warm-up", hold, arrivals=config.arrivals, target=target)
                self.observer.load_changed(level, f"{name}: measure", self.scenario.load.step_s)
                measured[name] = meter.measure(0, level, self.scenario.load.step_s)
                self.driver.stop()
        finally:
            self.driver.stop()
        return BaselineResult(
            users=users, envoy_cpu_cores=envoy_cpu, direct=measured["direct"], gateway=measured["gateway"]
        )

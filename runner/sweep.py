"""The sweep engine: interleaved rounds over the configurations (runner.rounds), each visit applying one,
stepping the load and measuring its windows (runner.visit); a configuration's knee, capacity and verdict
after its last round (runner.assess); then the baseline and the memory model's points when the scenario asks
for them (runner.memory_sweep)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner import environment
from runner.assess import assess, search_ending
from runner.clock import SYSTEM_CLOCK, Clock
from runner.driver import LoadDriver
from runner.errors import SizerError, StopRun
from runner.heartbeat import Heartbeat
from runner.knee import find_knee
from runner.live import LiveState
from runner.locust import LoadTarget
from runner.memory_sweep import MemoryExperiment
from runner.model import (
    BaselineResult,
    ConfigResult,
    LoadLevel,
    RoundRecord,
    RoundsRecord,
    RunStatus,
    Step,
)
from runner.observer import Broadcast, SweepObserver
from runner.plan import Configuration, Plan
from runner.platforms.base import Platform
from runner.results import RunStore, finish_result
from runner.rounds import RoundsPolicy, seed_for
from runner.scenario import Scenario
from runner.search import Targets
from runner.visit import Visit, VisitContext


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
        self._spent: dict[str, float] = {}  # seconds each configuration's visits took
        self._failed: set[str] = set()  # configurations that failed in this attempt (not visited again)
        self._started = self.clock.monotonic()  # this attempt's start: the time for rounds past the planned ones
        self.live = LiveState(self.scenario.threshold, self.scenario.load.latency_slo_ms)
        self.observer = Broadcast(self.observer, self.live)
        self.driver = LoadDriver(
            platform=self.platform, load=self.scenario.load, observer=self.observer, clock=self.clock
        )
        self.memory = None
        if self.scenario.memory is not None:
            self.memory = MemoryExperiment(
                scenario=self.scenario,
                platform=self.platform,
                store=self.store,
                driver=self.driver,
                observer=self.observer,
                clock=self.clock,
                armed=self._armed,
            )

    def run(self) -> RunStatus:
        """The whole sweep; returns the run's final status. Raises on Ctrl-C (or SIGTERM, SIGHUP) after
        saving what was measured, and on an error outside any configuration."""
        try:
            with self.platform, Heartbeat(self.platform.locust, self.live.snapshot) as self.heartbeat:
                self.platform.metrics.check()
                self.store.set_environment(environment.collect(self.platform.describe(), self.overrides))
                self.observer.run_started(self.store, self.platform.endpoints, self.plan)
                self._run_configs()
                self.store.summary.limit_changes = self.platform.limit_changes()
                if self.store.summary.rounds is not None:
                    self.observer.rounds_finished(len(self.store.summary.rounds.rounds))
                if self.scenario.baseline.enabled and self.store.summary.baseline is None:
                    self.run_baseline()
                if self.memory is not None:
                    self.memory.run()
        except KeyboardInterrupt as stop:
            self.store.finish("interrupted", f"stopped by {str(stop) or 'SIGINT (Ctrl-C)'}")
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
        """Every configuration in interleaved rounds (runner.rounds); with one round, in plan order."""
        record = self._rounds_record()
        policy = RoundsPolicy.of(record, self.scenario.load)
        by_key = {c.key: c for c in self.plan.configurations}
        for config in self.plan.configurations:
            done = self.store.summary.config(config.key)
            if done is not None and done.finished:
                self.observer.config_skipped(config, done)
        for number in range(1, policy.most + 1):
            active = [k for k in by_key if self._active(k)]
            if not active:
                return
            current = record.round(number)
            if current is None:
                current = RoundRecord(number=number, order=policy.order(active, record.seed, number))
                record.rounds = [*record.rounds, current]
                self.store.save()
            self.observer.round_started(number, record.planned, [by_key[k] for k in current.order])
            for position, key in enumerate(current.order, start=1):
                if key in current.visited or not self._active(key):
                    continue
                result = self._visit(by_key[key], number, position, len(current.order), record, policy)
                current.visited = [*current.visited, key]
                self.store.save()
                if result.status == "failed" and self.scenario.on_failure == "stop":
                    return

    def _rounds_record(self) -> RoundsRecord:
        """The run's rounds: the seed and counts, kept from the first attempt when resuming."""
        summary, load = self.store.summary, self.scenario.load
        if summary.rounds is None:
            seed = load.seed if load.seed is not None else seed_for(summary.run_id)
            summary.rounds = RoundsRecord(seed=seed, planned=load.rounds, max_rounds=load.round_limit)
            self.store.save()
        return summary.rounds

    def _active(self, key: str) -> bool:
        """Not yet finished: never visited, running, or failed in an earlier attempt of a resumed run."""
        result = self.store.summary.config(key)
        return result is None or result.status == "running" or (result.status == "failed" and key not in self._failed)

    def _armed(self) -> None:
        """PlatformError unless a heartbeat has reached the Locust master (see Heartbeat.check)."""
        if self.heartbeat is not None:
            self.heartbeat.check()

    def _final_status(self) -> tuple[RunStatus, str | None]:
        """`complete` only when every planned configuration finished; else `partial` or `failed`."""
        results = [self.store.summary.config(c.key) for c in self.plan.configurations]
        unfinished = [
            r.label if r else c.label
            for c, r in zip(self.plan.configurations, results, strict=True)
            if r is None or not r.finished
        ]
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

    def _visit(
        self, config: Configuration, round_: int, position: int, total: int, record: RoundsRecord, policy: RoundsPolicy
    ) -> ConfigResult:
        """Apply `config` and measure its windows of this round; an error fails only this configuration (StopRun
        fails it and stops the run). The configuration ends (knee, capacity, verdict) after its last round, or early
        when a guard says more load cannot help or its time budget is spent."""
        result = self.store.summary.config(config.key)
        if result is None or result.status == "failed":  # first visit, or a failure of an earlier attempt
            result = self.store.begin(config, order=[c.key for c in self.plan.configurations])
        self.observer.config_started(position, total, config)
        started = self.clock.monotonic()
        try:
            restarted = self.platform.recover()
            if restarted:
                self.observer.components_restarted(restarted)
            self.platform.apply(config)
            started = self.clock.monotonic()  # the time budget counts measuring, not the rollout before it
            threads = self.platform.envoy_threads(config)
            if threads is not None and result.envoy.threads != threads:
                result.envoy = result.envoy.model_copy(update={"threads": threads})
            if result.machine_speed is None:
                result.machine_speed = self.platform.machine_speed()
            stopped = self._new_visit(config, result, round_, record, policy).run()
        except SizerError as error:
            cause = self.platform.failure_cause(error)
            result.fail(cause.one_line())
            self._failed.add(config.key)
            self.store.save()
            self.observer.config_finished(result)
            if isinstance(cause, StopRun):  # found behind another error too (an apply refused once the Lease went)
                raise cause from error
            if isinstance(error, StopRun):
                raise
            return result
        finally:
            self.driver.stop()
        spent = self._spent[config.key] = self._spent.get(config.key, 0.0) + self.clock.monotonic() - started
        assessment = assess(result.steps, self.scenario.threshold, self.scenario.load.latency_slo_ms)
        elapsed = self.clock.monotonic() - self._started
        stopped = stopped or policy.out_of_rounds(assessment, round_, spent, elapsed)
        if stopped is not None or policy.last_round(assessment, round_):
            ending = search_ending(assessment, result.steps, Targets.from_load(self.scenario.load), stopped)
            finish_result(
                result,
                assessment.outcome,
                assessment.status,
                assessment.reason,
                assessment.capacity,
                search=ending,
                pod_knee=assessment.pod_knee,
            )
            self.store.save()
            self.observer.config_finished(result)
        else:
            self.observer.visit_finished(result, assessment)
        return result

    def _new_visit(
        self, config: Configuration, result: ConfigResult, round_: int, record: RoundsRecord, policy: RoundsPolicy
    ) -> Visit:
        """This round's visit to `config`, given what it needs as values."""
        context = VisitContext(
            load=self.scenario.load,
            threshold=self.scenario.threshold,
            scrape_interval_s=self.scenario.prometheus.scrape_interval_s,
            policy=policy,
            platform=self.platform,
            driver=self.driver,
            observer=self.observer,
            store=self.store,
            clock=self.clock,
            armed=self._armed,
        )
        first = next((c for c in self.plan.configurations if self._active(c.key)), None)
        return Visit(
            context,
            config,
            result,
            round_,
            record=record,
            spent_s=self._spent.get(config.key, 0.0),
            knee_per_core=self._knee_per_core(config),
            leads=first is not None and first.key == config.key,
        )

    def _knee_per_core(self, config: Configuration) -> float | None:
        """RPS per core at the knee of the other configurations measured so far with the same arrivals and
        traffic profile (a TLS handshake per request costs many times a keep-alive request)."""
        rates = []
        for other in self.store.summary.configs:
            if other.key == config.key or other.arrivals != config.arrivals or other.profile != config.profile:
                continue
            knee = other.valid_knee if other.finished else find_knee(other.steps, self.scenario.threshold).knee
            if knee is not None and other.status != "failed":
                rates.append(knee.per_core(other.envoy.fleet_cpu_cores))
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

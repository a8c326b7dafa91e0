"""The memory model's experiment: Envoy's working set at held idle connections and at extra routes.

Envoy's memory depends on the connections it holds and on its configuration, not on requests per second. For
each point of the scenario's `memory` section the sweep restarts Envoy (as a rollout does) at the memory
limits with the point's extra routes, runs the light load, has the Locust master hold the point's idle
keep-alive connections through the gateway (locustfiles/connection_holder.py), waits for them to settle and
measures one window: the working set, Envoy's heap and allocated bytes, its active downstream connections (the
proof that they were held), CPU and RPS, and the control plane's (Contour's) CPU and working set where there
is one. On Kubernetes, "restart at the extra routes" is "add the HTTPProxies the point lacks to the running
gateway", timed until Envoy serves them (platforms/kubernetes/routes.py). Each point is saved as soon as it is
measured; a resumed run measures only the points not yet measured. Whatever happens, the connections are
released and the load stopped before the next point (and the master releases them by itself when the runner
falls silent).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from runner.clock import SYSTEM_CLOCK, Clock
from runner.driver import LoadDriver
from runner.errors import LoadGeneratorError, PlatformError, SizerError, StopRun
from runner.locust import REPORT_LAG_S, HeldConnections, LoadTarget, LocustOptions
from runner.metrics import ENVOY_ACTIVE_CONNECTIONS, ENVOY_ALLOCATED, ENVOY_HEAP
from runner.model import LoadLevel, MemoryPoint, MemoryResult, RouteProgramming
from runner.observer import SweepObserver
from runner.plan import Configuration
from runner.platforms.base import ConnectionHolder, MemoryMetrics, Platform
from runner.profiles import PLAIN_PROFILE
from runner.quantities import format_memory
from runner.results import RunStore
from runner.scenario import MemorySpec, Scenario

POLL_S = 0.5
OPEN_SLACK_S = 30.0  # beyond count / open_rate, for the holder to open (or fail) every connection
MAX_LOST_SHARE = 0.01  # a point holding fewer than 99% of its connections has failed
LIGHT_LOAD = "memory: light load"


@dataclass(frozen=True)
class MemoryPointPlan:
    """One point to measure: held connections and extra routes."""

    connections: int
    routes: int

    @property
    def key(self) -> str:
        return f"connections={self.connections},routes={self.routes}"

    @property
    def label(self) -> str:
        return f"{self.connections:,} held connections, {self.routes:,} extra routes"


def plan_memory(spec: MemorySpec) -> tuple[MemoryPointPlan, ...]:
    """The connection points (no extra route), then the route points (no held connection), each once."""
    points = [MemoryPointPlan(c, 0) for c in sorted(spec.connections)]
    points += [MemoryPointPlan(0, r) for r in sorted(spec.routes)]
    return tuple(dict.fromkeys(points))


def memory_configuration(scenario: Scenario, routes: int = 0) -> Configuration:
    """Envoy's configuration at a memory point: the memory section's limits (default: the sweep's largest)."""
    spec = scenario.memory or MemorySpec(connections=(0,))
    cpu = spec.cpu_for(scenario.envoy.cpu_cores)
    return Configuration(
        envoy_cpu_cores=cpu,
        envoy_memory_bytes=spec.memory_for(scenario.envoy.memory_bytes),
        envoy_concurrency=scenario.envoy.concurrency_for(cpu),
        backend_replicas=scenario.backend.max_replicas,
        arrivals=scenario.load.arrivals[0],
        extra_routes=routes,
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


class MemoryExperiment:
    """Measures the scenario's memory points on `platform`, saving each into `store`."""

    def __init__(
        self,
        *,
        scenario: Scenario,
        platform: Platform,
        store: RunStore,
        driver: LoadDriver,
        observer: SweepObserver,
        clock: Clock = SYSTEM_CLOCK,
        armed: Callable[[], None] = lambda: None,
    ) -> None:
        """`armed` raises when the Locust master's dead-man switch is not armed (no heartbeat arrived): no
        connection is held without it."""
        if scenario.memory is None:
            raise ValueError("the scenario has no memory section")
        self.scenario, self.spec = scenario, scenario.memory
        self.platform, self.store, self.driver, self.observer, self.clock = platform, store, driver, observer, clock
        self.armed = armed
        self.points = plan_memory(self.spec)

    def unfinished(self) -> list[str]:
        """Labels of the points not measured (yet, or failed)."""
        result = self.store.summary.memory
        done = {p.key for p in result.points if p.measured} if result else set()
        return [p.label for p in self.points if p.key not in done]

    def _start_result(self) -> MemoryResult:
        if self.store.summary.memory is None:
            config = memory_configuration(self.scenario)
            self.store.summary.memory = MemoryResult(
                envoy_cpu_cores=config.envoy_cpu_cores,
                envoy_memory=format_memory(config.envoy_memory_bytes),
                envoy_memory_bytes=config.envoy_memory_bytes,
                concurrency=config.envoy_concurrency,
                cgroup_version=self.store.summary.environment.cgroup_version,
                rps=self.spec.rps,
                refresh_s=self.spec.refresh_s,
                hold_s=self.spec.hold_s,
                accept_encoding=LocustOptions.from_load(self.scenario.load).accept_encoding,
            )
            self.store.save()
        return self.store.summary.memory

    def run(self) -> None:
        """Every point not yet measured; stops after a failed one when the scenario says `on_failure: stop`."""
        result = self._start_result()
        for position, plan in enumerate(self.points, start=1):
            done = result.point(plan.key)
            if done is not None and done.measured:
                self.observer.memory_point_skipped(plan.label)
                continue
            self.observer.memory_point_started(position, len(self.points), plan.label)
            point = self.run_point(plan)
            self.store.add_memory_point(point)
            self.observer.memory_point_measured(point)
            if not point.measured and self.scenario.on_failure == "stop":
                return

    def _holder(self) -> ConnectionHolder:
        holder = self.platform.connection_holder()
        if holder is None:
            raise PlatformError(f"the {self.platform.name} platform's load generator cannot hold connections")
        return holder

    def run_point(self, plan: MemoryPointPlan) -> MemoryPoint:
        """Measure one point; an error fails only this point (the reason is kept with it), StopRun the run."""
        holder = self._holder()
        try:
            restarted = self.platform.recover()
            if restarted:
                self.observer.components_restarted(restarted)
            self.platform.apply(memory_configuration(self.scenario, plan.routes), fresh=True)
            programming = self.platform.route_programming()
            self.armed()
            target = self.platform.target(PLAIN_PROFILE, self.scenario.load)
            self._light_load(target)
            if plan.connections:
                self._hold(holder, plan.connections, target)
            self.observer.load_changed(self._level(), "memory: settle", self.spec.settle_s)
            self._sleep(self.spec.settle_s)
            return self._measure(holder, plan, programming)
        except SizerError as error:
            cause = self.platform.failure_cause(error)
            if isinstance(cause, StopRun):  # found behind another error too (an apply refused once the Lease went)
                raise cause from error
            if isinstance(error, StopRun):
                raise
            return MemoryPoint(
                key=plan.key, connections=plan.connections, routes=plan.routes, status="failed", reason=cause.one_line()
            )
        finally:
            with contextlib.suppress(SizerError):
                holder.release_connections()
            self.driver.stop()

    def _level(self) -> LoadLevel:
        """The light load: users at up to `load.max_rps_per_user` each, `memory.rps` in all (none at 0)."""
        if self.spec.rps <= 0:
            return LoadLevel(users=0)
        users = max(1, math.ceil(self.spec.rps / self.scenario.load.max_rps_per_user))
        return LoadLevel(users=users, user_rps=self.spec.rps / users)

    def _light_load(self, target: LoadTarget) -> None:
        level = self._level()
        if level.users:
            self.driver.set(level, LIGHT_LOAD, 0.0, arrivals=self.scenario.load.arrivals[0], target=target)

    def _sleep(self, seconds: float) -> None:
        """Sleep in short steps, checking that the platform's parts (Envoy above all) stay alive."""
        deadline = self.clock.monotonic() + seconds
        while (remaining := deadline - self.clock.monotonic()) > 0:
            self.clock.sleep(min(remaining, POLL_S))
            self.platform.check()

    def _hold(self, holder: ConnectionHolder, count: int, target: LoadTarget) -> HeldConnections:
        """Ask the master for `count` connections to `target` and wait until each was opened or failed."""
        spec = self.spec
        held = holder.hold_connections(
            count, target.url, target.host_header, path=target.path, refresh_s=spec.refresh_s, open_rate=spec.open_rate
        )
        budget_s = count / spec.open_rate + OPEN_SLACK_S
        self.observer.load_changed(self._level(), f"memory: opening {count:,} connections", budget_s)
        deadline = self.clock.monotonic() + budget_s
        while not held.settled:
            if self.clock.monotonic() > deadline:
                raise LoadGeneratorError(
                    f"the connection holder opened {held.opened:,} of {count:,} connections in {budget_s:.0f} s",
                    "lower memory.open_rate, or check the Locust master's log",
                )
            self._sleep(POLL_S)
            held = holder.connections()
        if held.held < count * (1 - MAX_LOST_SHARE):
            raise LoadGeneratorError(
                f"held {held.held:,} of {count:,} connections (failed {held.failed:,}, closed by the gateway "
                f"{held.closed_by_peer:,}; last error: {held.last_error or '-'})",
                "check the gateway's log and its limits (memory, overload manager, open files)",
            )
        return held

    def _measure(
        self, holder: ConnectionHolder, plan: MemoryPointPlan, programming: RouteProgramming | None
    ) -> MemoryPoint:
        """One window [start, end) from the next whole second: the figures once Prometheus has them."""
        metrics = self.platform.memory_metrics()
        if metrics is None:
            raise PlatformError(f"the {self.platform.name} platform's metrics lack the memory model's queries")
        envoy = self.platform.selectors.envoy
        start = math.ceil(self.clock.time())
        end = start + max(1, round(self.spec.hold_s))
        lag = max(REPORT_LAG_S, metrics.scrape_interval_s + 0.5)
        self.observer.load_changed(self._level(), "memory: measure", end - start)
        self._sleep(start + lag - self.clock.time())
        before = holder.snapshot()
        self._sleep(end + lag - self.clock.time())
        after, held = holder.snapshot(), holder.connections()
        if plan.connections and held.held < plan.connections * (1 - MAX_LOST_SHARE):
            raise LoadGeneratorError(
                f"the gateway closed held connections during the window: {held.held:,} of {plan.connections:,} "
                f"left (last error: {held.last_error or '-'})"
            )
        requests = sum(n for second, n in after.requests_per_second.items() if start <= second < end)
        if self._level().users and after.started_at != before.started_at:
            raise LoadGeneratorError("the Locust master restarted during the window")
        cpu = metrics.cpu_cores(envoy, start, end)
        return MemoryPoint(
            programming=programming,
            **self._control_plane(metrics, start, end, programming),
            key=plan.key,
            connections=plan.connections,
            routes=plan.routes,
            held=held.held,
            opened=held.opened,
            open_failures=held.failed,
            closed_by_peer=held.closed_by_peer,
            envoy_connections=_finite(metrics.envoy_gauge(ENVOY_ACTIVE_CONNECTIONS, envoy, start, end)),
            working_set_bytes=_finite(metrics.memory_working_set_mean_bytes(envoy, start, end)),
            working_set_max_bytes=_finite(metrics.memory_working_set_bytes(envoy, start, end)),
            heap_bytes=_finite(metrics.envoy_gauge(ENVOY_HEAP, envoy, start, end)),
            allocated_bytes=_finite(metrics.envoy_gauge(ENVOY_ALLOCATED, envoy, start, end)),
            envoy_cpu_cores=_finite(cpu.mean),
            envoy_rps=_finite(metrics.envoy_rps(envoy, start, end)),
            rps=requests / (end - start),
            refresh_rps=plan.connections / self.spec.refresh_s,
            started_at=float(start),
            window_s=float(end - start),
        )

    def _control_plane(
        self, metrics: MemoryMetrics, start: float, end: float, programming: RouteProgramming | None
    ) -> dict[str, float | None]:
        """Contour's CPU and working set over the window, and its CPU while the point's new routes were
        programmed; nothing on a platform without a control plane."""
        contour = self.platform.selectors.control_plane
        if contour is None:
            return {}
        figures = {
            "contour_cpu_cores": _finite(metrics.cpu_cores(contour, start, end).mean),
            "contour_working_set_bytes": _finite(metrics.memory_working_set_mean_bytes(contour, start, end)),
        }
        if programming is not None:
            busy = metrics.cpu_cores(contour, math.floor(programming.started_at), math.ceil(programming.ended_at))
            figures["programming_contour_cpu_cores"] = _finite(busy.mean)
        return figures

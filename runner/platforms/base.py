"""The interface every platform implements: start, apply a configuration, expose load and metrics, stop.

Optional capabilities are hooks that return None when a platform lacks them (the memory model's connection
holder and memory queries); `LocustPrometheusPlatform` is the base of the platforms that drive a Locust master
and read Prometheus, and so have both."""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Protocol

from runner.errors import PlatformError, SizerError, UsageError
from runner.locust import HeldConnections, LoadTarget, LocustMaster, Snapshot
from runner.measure import Capacities, LoadGenerator, MetricSource
from runner.metrics import Metrics, Selector, Selectors, WindowStats
from runner.model import RouteProgramming
from runner.plan import Configuration
from runner.profiles import TrafficProfile
from runner.scenario import LoadSpec


@dataclass(frozen=True)
class Endpoints:
    """Where a person (and the runner) reaches the platform's parts."""

    gateway: str  # URL Locust workers send requests to
    locust_web_ui: str  # URL, or the command that opens it
    prometheus: str
    backend: str  # the backend itself, bypassing the gateway (for the baseline)


class ConnectionHolder(Protocol):
    """What the memory model asks of the load generator besides load: idle connections held through the gateway
    (runner.locust.LocustMaster, locustfiles/connection_holder.py)."""

    def hold_connections(
        self, count: int, url: str, host_header: str, *, path: str = "/", refresh_s: float, open_rate: float
    ) -> HeldConnections: ...
    def connections(self) -> HeldConnections: ...
    def release_connections(self) -> None: ...
    def snapshot(self) -> Snapshot: ...


class MemoryMetrics(Protocol):
    """What the memory model reads from the metrics store (runner.metrics.Metrics)."""

    scrape_interval_s: float

    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats: ...
    def envoy_rps(self, selector: Selector, start: float, end: float) -> float: ...
    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float: ...
    def memory_working_set_mean_bytes(self, selector: Selector, start: float, end: float) -> float: ...
    def envoy_gauge(self, template: str, selector: Selector, start: float, end: float) -> float: ...


class Platform(ABC):
    """A place to run the sweep. `with platform:` starts it and undoes everything on exit."""

    name: ClassVar[str]

    @abstractmethod
    def start(self) -> None:
        """Start or connect to the shared parts (Prometheus, Locust master and workers, the gateway)."""

    @abstractmethod
    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        """Give Envoy (and Contour, the backend) the configuration's resources; return once it serves.
        `fresh`: a new Envoy even where only its limits change (the memory model measures one per point)."""

    @abstractmethod
    def stop(self) -> None:
        """Undo everything `start` and `apply` did. Idempotent; safe after a partial start."""

    @property
    @abstractmethod
    def locust(self) -> LoadGenerator: ...

    @property
    @abstractmethod
    def metrics(self) -> MetricSource: ...

    @property
    @abstractmethod
    def selectors(self) -> Selectors: ...

    @property
    @abstractmethod
    def endpoints(self) -> Endpoints: ...

    def target(self, profile: TrafficProfile, load: LoadSpec) -> LoadTarget:
        """Where and how the load generator sends a profile's requests: the gateway's plain HTTP listener
        with the scenario's Host header; a platform with a TLS listener overrides this for TLS profiles."""
        if profile.tls:
            raise UsageError(f"profile {profile.name}: the {self.name} platform has no TLS listener")
        return LoadTarget(
            self.endpoints.gateway,
            load.host_header,
            profile.path(load.path),
            profile.new_connection,
            profile.accept_encoding,
        )

    def capacities(self) -> Capacities:
        """How much CPU a Locust worker and an nginx replica have, for the validity guards."""
        return Capacities()

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raise PlatformError when a part the run depends on has died (StopRun when the run must end at once)."""

    def failure_cause(self, error: SizerError) -> SizerError:
        """What a configuration or memory point failed of: what `check` finds (a part that died, a Lease another run
        took over) rather than what it caused first (its API unreachable, a scrape that came back empty), else
        `error` itself."""
        try:
            self.check()
        except PlatformError as found:
            return found
        return error

    def recover(self) -> list[str]:
        """Before a configuration: bring back shared parts that died (or raise PlatformError naming them);
        returns the names of the parts started again."""
        return []

    def route_programming(self) -> RouteProgramming | None:
        """How long the routes the last `apply` added took to be served, on a platform that programs routes
        at runtime (None: no route added, or routes are part of a restart, as on the local platform)."""
        return None

    def machine_speed(self) -> float | None:
        """How fast Envoy's CPUs run now, in million reference-loop iterations per second (None: unknown)."""
        return None

    def envoy_threads(self, config: Configuration) -> int | None:
        """The worker threads Envoy runs with for `config`, as read after `apply` (None: what the configuration
        asked, `envoy_concurrency`, is all there is to say)."""
        return None

    def limit_changes(self) -> str | None:
        """How this platform changed Envoy's limits from one configuration to the next, for the report (None:
        it did not say)."""
        return None

    def cpu_steal(self) -> tuple[float, float] | None:
        """The machine's CPU time stolen by its hypervisor and its total CPU time so far, in seconds (None: the
        platform cannot read the machine Envoy runs on)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Versions and facts for the report's environment table."""
        return {}

    def connection_holder(self) -> ConnectionHolder | None:
        """The load generator's connection holder, for the memory model (None: it cannot hold connections)."""
        return None

    def memory_metrics(self) -> MemoryMetrics | None:
        """The metric source's memory queries, for the memory model (None: it has none)."""
        return None

    def __enter__(self) -> Platform:
        try:
            self.start()
        except BaseException:
            stop_shielded(self.stop)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        stop_shielded(self.stop)


class LocustPrometheusPlatform(Platform):
    """A platform that drives a Locust master (runner.locust) and reads Prometheus (runner.metrics): it has the
    memory model's capabilities."""

    @property
    @abstractmethod
    def locust(self) -> LocustMaster: ...

    @property
    @abstractmethod
    def metrics(self) -> Metrics: ...

    def connection_holder(self) -> LocustMaster:
        return self.locust

    def memory_metrics(self) -> Metrics:
        return self.metrics


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_shielded(stop: Callable[[], None]) -> None:
    """Run a teardown that a second Ctrl-C, SIGTERM or SIGHUP must not cut short."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

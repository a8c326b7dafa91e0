"""One load step: hold a load level for a window and measure it from Locust and Prometheus.

The meter reads through two small interfaces, `LoadGenerator` (Locust's master) and `MetricSource`
(Prometheus), and an injected clock, so the engine can run against the real services or a simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from runner.clock import SYSTEM_CLOCK, Clock
from runner.errors import WindowDiscarded
from runner.locust import REPORT_LAG_S
from runner.metrics import MIN_CPU_SAMPLES, PodReading, Selector, Selectors, WindowStats
from runner.model import LoadLevel, Step
from runner.pod_window import PodWindow, thread_wall_cores

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.locust import LocustOptions, Snapshot

MISSING = "missing"  # Locust's state of a worker whose heartbeats stopped (it no longer sends figures)
MAX_WINDOW_FACTOR = 8  # a window grows to at most this many times its length to collect CPU samples


class LoadGenerator(Protocol):
    """What the engine asks of the load generator (Locust's master)."""

    def swarm(self, users: int, spawn_rate: float, host: str, options: LocustOptions) -> None: ...
    def stop(self) -> None: ...
    def snapshot(self) -> Snapshot: ...
    def heartbeat(self, timeout_s: float, state: dict[str, Any]) -> None: ...


class MetricSource(Protocol):
    """What the engine reads from the metrics store (Prometheus), over [start, end] windows."""

    scrape_interval_s: float

    def check(self) -> None: ...
    def cpu_samples(self, selector: Selector, start: float, end: float) -> int: ...
    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats: ...
    def cpu_cores_by_pod(self, selector: Selector, start: float, end: float) -> dict[str, float]: ...
    def envoy_rps(self, selector: Selector, start: float, end: float) -> float: ...
    def envoy_cx_rate(self, selector: Selector, start: float, end: float) -> float: ...
    def envoy_pods(
        self, selector: Selector, start: float, end: float, spacing_s: float = 0.0
    ) -> dict[str, PodReading]: ...
    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float: ...


def percentile(histogram: dict[int, int], fraction: float) -> float | None:
    """The response time (ms) at `fraction` of a {ms: count} histogram, as Locust computes it."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    rank = fraction * total
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return float(value)
    return float(max(histogram))


def histogram_delta(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    return {ms: n - before.get(ms, 0) for ms, n in after.items() if n - before.get(ms, 0) > 0}


def _count(per_second: dict[int, int], start: int, end: int) -> int:
    return sum(per_second.get(second, 0) for second in range(start, end))


def _finite(value: float, default: float = 0.0) -> float:
    return value if math.isfinite(value) else default


def _share(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    """Stolen time over all time between two (stolen, total) readings; None when either is missing."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return max(0.0, (after[0] - before[0]) / (after[1] - before[1]))


def _optional(value: float) -> float | None:
    return value if math.isfinite(value) else None


def pod_windows(readings: dict[str, PodReading], limit_cores: float, rps: float) -> tuple[PodWindow, ...]:
    """Each pod's window from its reading: CPU over the pod's own limit, and the pod's share of the window's `rps`
    by its share of Envoy's own request counts (an even share when a pod's counter was not scraped)."""
    counted = {pod: r.envoy_rps for pod, r in readings.items() if math.isfinite(r.envoy_rps)}
    total = sum(counted.values())
    wall = thread_wall_cores(limit_cores)
    windows = []
    for pod, reading in sorted(readings.items()):
        share = counted[pod] / total if pod in counted and total > 0 else 1 / len(readings)
        workers = reading.worker_cores
        hottest = max(workers) if workers else None
        windows.append(
            PodWindow(
                pod=pod,
                cpu_cores=_finite(reading.cpu.mean),
                cpu_utilization_min=_finite(reading.cpu.min) / limit_cores,
                cpu_utilization_mean=_finite(reading.cpu.mean) / limit_cores,
                cpu_utilization_max=_finite(reading.cpu.max) / limit_cores,
                rps=rps * share,
                envoy_rps=_optional(reading.envoy_rps),
                throttled_share=reading.throttled_share,
                envoy_cx_rate=_optional(reading.envoy_cx_rate),
                active_connections=_optional(reading.active_connections),
                worker_threads=len(workers) or None,
                hottest_worker_cores=hottest,
                mean_worker_cores=sum(workers) / len(workers) if workers else None,
                hottest_worker_share=hottest / wall if hottest is not None else None,
                cpu_limit_cores=limit_cores,
            )
        )
    return tuple(windows)


@dataclass(frozen=True)
class Capacities:
    """The CPU a Locust worker and an nginx replica can use, in cores (None: unknown, not judged)."""

    generator_cores: float = 1.0  # a Locust worker is one Python process: one core at most
    backend_cores: float | None = None


class StepMeter:
    """Measures windows: requests/failures/latency from Locust, CPU and Envoy RPS from Prometheus."""

    def __init__(
        self,
        *,
        locust: LoadGenerator,
        metrics: MetricSource,
        selectors: Selectors,
        envoy_cpu_limit_cores: float,
        capacities: Capacities = Capacities(),
        clock: Clock = SYSTEM_CLOCK,
        alive: Callable[[], None] = lambda: None,
        steal: Callable[[], tuple[float, float] | None] = lambda: None,
        workers: int | None = None,
    ) -> None:
        self.workers = workers  # the run's Locust workers: a window with any other count is discarded
        self.steal = steal  # the machine's (stolen, total) CPU time so far, when the platform can read it
        self.locust = locust
        self.metrics = metrics
        self.selectors = selectors
        self.limit = envoy_cpu_limit_cores
        self.capacities = capacities
        self.clock = clock
        self._alive = alive

    def _sleep_until(self, moment: float) -> None:
        while (remaining := moment - self.clock.time()) > 0:
            self.clock.sleep(min(remaining, 1.0))
            self._alive()

    def measure(self, index: int, level: LoadLevel, window_s: float) -> Step:
        """Measure [t0, t0 + window) starting at the next whole second; returns after the data is in.

        The window grows (the load holding) until Envoy's CPU counter has MIN_CPU_SAMPLES samples in it,
        up to MAX_WINDOW_FACTOR times its length: a kubelet's cAdvisor refreshes it only every 10-15 s.
        """
        start = math.ceil(self.clock.time())
        end = start + max(1, round(window_s))
        lag = max(REPORT_LAG_S, self.metrics.scrape_interval_s + 0.5)
        self._sleep_until(start + lag)
        before = self.locust.snapshot()
        steal_before = self.steal()
        self._sleep_until(end + lag)
        samples = self.metrics.cpu_samples(self.selectors.envoy, start, end)
        while samples < MIN_CPU_SAMPLES and end - start < MAX_WINDOW_FACTOR * window_s:
            end += max(1, round(window_s / 2))
            self._sleep_until(end + lag)
            samples = self.metrics.cpu_samples(self.selectors.envoy, start, end)
        after = self.locust.snapshot()
        if after.started_at != before.started_at:
            raise WindowDiscarded("Locust's master restarted during the window: its counters started again")
        if not after.loading or not before.loading:
            raise WindowDiscarded(f"the load was not running through the window (Locust's master is {after.state})")
        if self.workers is not None:
            check_workers(self.workers, before, after)
        spacing = (end - start) / (samples - 1) if samples > 1 else float(end - start)
        step = self._step(index, level, start, end, before, after, spacing)
        return step.model_copy(update={"steal_share": _share(steal_before, self.steal())})

    def _generator_share(self, after: Snapshot, start: int, end: int) -> float:
        """The busiest Locust worker's share of the CPU it has, from Locust's own report or its cgroup."""
        by_worker = max((w.cpu_percent / 100.0 for w in after.workers), default=0.0)
        by_pod = max(self.metrics.cpu_cores_by_pod(self.selectors.generator, start, end).values(), default=0.0)
        return max(by_worker, by_pod) / self.capacities.generator_cores

    def _backend_share(self, start: int, end: int) -> float:
        """The busiest nginx replica's share of the CPU it has (0 when its capacity is unknown)."""
        if not self.capacities.backend_cores:
            return 0.0
        by_pod = self.metrics.cpu_cores_by_pod(self.selectors.backend, start, end)
        return max(by_pod.values(), default=0.0) / self.capacities.backend_cores

    def _step(
        self, index: int, level: LoadLevel, start: int, end: int, before: Snapshot, after: Snapshot, spacing: float
    ) -> Step:
        window = end - start
        envoy = self.selectors.envoy
        requests = _count(after.requests_per_second, start, end)
        failures = _count(after.failures_per_second, start, end)
        latency = histogram_delta(before.response_times_ms, after.response_times_ms)
        cpu = self.metrics.cpu_cores(envoy, start, end, spacing)
        pods = pod_windows(self.metrics.envoy_pods(envoy, start, end, spacing), self.limit, requests / window)
        busiest = max(pods, key=lambda p: p.cpu_utilization_mean, default=None)
        backend = self.metrics.cpu_cores(self.selectors.backend, start, end)
        return Step(
            index=index,
            users=level.users,
            target_rps=level.target_rps,
            rps=requests / window,
            envoy_rps=_finite(self.metrics.envoy_rps(envoy, start, end)),
            # the busiest pod's, each pod against its own limit (a fleet's summed CPU over one pod's limit would
            # call three pods at 30% a 90% window)
            cpu_utilization_min=max((p.cpu_utilization_min for p in pods), default=0.0),
            cpu_utilization_mean=busiest.cpu_utilization_mean if busiest else 0.0,
            cpu_utilization_max=max((p.cpu_utilization_max for p in pods), default=0.0),
            envoy_cpu_cores=_finite(cpu.mean),
            envoy_memory_bytes=_finite(self.metrics.memory_working_set_bytes(envoy, start, end)),
            p50_ms=percentile(latency, 0.50),
            p95_ms=percentile(latency, 0.95),
            p99_ms=percentile(latency, 0.99),
            fail_ratio=failures / requests if requests else 0.0,
            requests=requests,
            failures=failures,
            generator_cpu_max=self._generator_share(after, start, end),
            backend_cpu_cores=_finite(backend.mean),
            started_at=float(start),
            window_s=float(window),
            backend_cpu_max=self._backend_share(start, end),
            throttled_share=busiest.throttled_share if busiest else None,
            envoy_cx_rate=_optional(self.metrics.envoy_cx_rate(envoy, start, end)),
            pods=pods,
        )


def check_workers(expected: int, before: Snapshot, after: Snapshot) -> None:
    """WindowDiscarded unless the run's own `expected` workers, and only they, sent a window's figures (the
    snapshots at its start and end): a worker lost, or one that connected to the master's port mid-run (a
    stranger's requests and latencies, or users taken from the run's workers), changes what the window counted."""
    ids = [{w.id for w in snapshot.workers if w.state != MISSING} for snapshot in (before, after)]
    if ids[0] != ids[1] or len(ids[1]) != expected:
        changed = "" if ids[0] == ids[1] else " (the workers changed)"
        raise WindowDiscarded(
            f"{len(ids[0])} then {len(ids[1])} Locust workers sent the window's figures, not the run's "
            f"{expected}{changed}: a worker lost, or a stranger on the master's worker port"
        )

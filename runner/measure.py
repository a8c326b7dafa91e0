"""One load step: hold a load level for a window and measure it from Locust and Prometheus."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from runner.locust import REPORT_LAG_S, LocustMaster, Snapshot
from runner.metrics import MIN_CPU_SAMPLES, Metrics, Selectors

MAX_WINDOW_FACTOR = 8  # a window grows to at most this many times its length to collect CPU samples


@dataclass(frozen=True)
class LoadLevel:
    """What Locust is asked to do: `users` users, each paced at `user_rps` (0 = closed loop, no wait)."""

    users: int
    user_rps: float = 0.0

    @property
    def target_rps(self) -> float | None:
        return self.users * self.user_rps if self.user_rps > 0 else None


@dataclass(frozen=True)
class Step:
    """What one measuring window saw. Utilization is Envoy's CPU over its CPU limit; `generator_cpu_max`
    and `backend_cpu_max` are the busiest Locust worker's and nginx replica's share of the CPU they have;
    `guards` lists the validity guards that fired (see runner.guards)."""

    index: int
    users: int
    target_rps: float | None
    rps: float
    envoy_rps: float
    cpu_utilization_min: float
    cpu_utilization_mean: float
    cpu_utilization_max: float
    envoy_cpu_cores: float
    envoy_memory_bytes: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    fail_ratio: float
    requests: int
    failures: int
    generator_cpu_max: float
    backend_cpu_cores: float
    started_at: float
    window_s: float
    backend_cpu_max: float = 0.0
    guards: tuple[dict[str, str], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


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


@dataclass(frozen=True)
class Capacities:
    """The CPU a Locust worker and an nginx replica can use, in cores (None: unknown, not judged)."""

    generator_cores: float = 1.0  # a Locust worker is one Python process: one core at most
    backend_cores: float | None = None


class StepMeter:
    """Measures windows: requests/failures/latency from Locust, CPU and Envoy RPS from Prometheus."""

    def __init__(
        self,
        locust: LocustMaster,
        metrics: Metrics,
        selectors: Selectors,
        envoy_cpu_limit_cores: float,
        *,
        capacities: Capacities = Capacities(),
        sleep: Callable[[float], None] = time.sleep,
        alive: Callable[[], None] = lambda: None,
    ) -> None:
        self.locust = locust
        self.metrics = metrics
        self.selectors = selectors
        self.limit = envoy_cpu_limit_cores
        self.capacities = capacities
        self._sleep = sleep
        self._alive = alive

    def _sleep_until(self, moment: float) -> None:
        while (remaining := moment - time.time()) > 0:
            self._sleep(min(remaining, 1.0))
            self._alive()

    def measure(self, index: int, level: LoadLevel, window_s: float) -> Step:
        """Measure [t0, t0 + window) starting at the next whole second; returns after the data is in.

        The window grows (the load holding) until Envoy's CPU counter has MIN_CPU_SAMPLES samples in it,
        up to MAX_WINDOW_FACTOR times its length: a kubelet's cAdvisor refreshes it only every 10-15 s.
        """
        start = math.ceil(time.time())
        end = start + max(1, round(window_s))
        lag = max(REPORT_LAG_S, self.metrics.scrape_interval_s + 0.5)
        self._sleep_until(start + lag)
        before = self.locust.snapshot()
        self._sleep_until(end + lag)
        samples = self.metrics.cpu_samples(self.selectors.envoy, start, end)
        while samples < MIN_CPU_SAMPLES and end - start < MAX_WINDOW_FACTOR * window_s:
            end += max(1, round(window_s / 2))
            self._sleep_until(end + lag)
            samples = self.metrics.cpu_samples(self.selectors.envoy, start, end)
        after = self.locust.snapshot()
        spacing = (end - start) / (samples - 1) if samples > 1 else float(end - start)
        return self._step(index, level, start, end, before, after, spacing)

    def _step(
        self, index: int, level: LoadLevel, start: int, end: int, before: Snapshot, after: Snapshot, spacing: float
    ) -> Step:
        window = end - start
        requests = _count(after.requests_per_second, start, end)
        failures = _count(after.failures_per_second, start, end)
        latency = histogram_delta(before.response_times_ms, after.response_times_ms)
        cpu = self.metrics.cpu_cores(self.selectors.envoy, start, end, spacing)
        backend = self.metrics.cpu_cores(self.selectors.backend, start, end)
        generator_pods = self.metrics.cpu_cores_by_pod(self.selectors.generator, start, end)
        generator = (
            max(
                max((w.cpu_percent / 100.0 for w in after.workers), default=0.0),
                max(generator_pods.values(), default=0.0),
            )
            / self.capacities.generator_cores
        )
        backend_max = 0.0
        if self.capacities.backend_cores:
            by_pod = self.metrics.cpu_cores_by_pod(self.selectors.backend, start, end)
            backend_max = max(by_pod.values(), default=0.0) / self.capacities.backend_cores
        return Step(
            index=index,
            users=level.users,
            target_rps=level.target_rps,
            rps=requests / window,
            envoy_rps=_finite(self.metrics.envoy_rps(self.selectors.envoy, start, end)),
            cpu_utilization_min=_finite(cpu.min) / self.limit,
            cpu_utilization_mean=_finite(cpu.mean) / self.limit,
            cpu_utilization_max=_finite(cpu.max) / self.limit,
            envoy_cpu_cores=_finite(cpu.mean),
            envoy_memory_bytes=_finite(self.metrics.memory_working_set_bytes(self.selectors.envoy, start, end)),
            p50_ms=percentile(latency, 0.50),
            p95_ms=percentile(latency, 0.95),
            p99_ms=percentile(latency, 0.99),
            fail_ratio=failures / requests if requests else 0.0,
            requests=requests,
            failures=failures,
            generator_cpu_max=generator,
            backend_cpu_cores=_finite(backend.mean),
            started_at=float(start),
            window_s=float(window),
            backend_cpu_max=backend_max,
        )

"""The one simulated Envoy, and a fake platform for engine tests: the simulated Envoy behind fake Locust and
Prometheus clients, on a fake clock. Nothing real runs: a sweep over it takes milliseconds. It stands in for the
real platform only where the engine's own behaviour is under test (search, resume, failures, budgets, verdicts)
or a report needs a run with rounds (support.rounds); the real components are exercised in tests/local and
tests/kubernetes. `SimulatedEnvoy.window` measures one window of it without the engine (search and knee tests).

The simulated Envoy is made to look like the real one measured on the 2-core machine: its CPU per request
falls as load rises (utilization grows more slowly than RPS), each one-second sample of its CPU counter
carries noise, it serves no more than its CPU limit allows, and past that latency climbs and the offered
load is no longer delivered.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from runner.errors import UnreachableError
from runner.locust import LocustOptions, Snapshot, WorkerStatus
from runner.measure import Capacities
from runner.metrics import PodReading, Selector, Selectors, WindowStats
from runner.model import LoadLevel, Step
from runner.plan import Configuration
from runner.platforms.base import Endpoints, Platform
from support.steps import make_step

EPOCH = 1_800_000_000.0
SELECTORS = Selectors(
    envoy=Selector("projectcontour", "envoy-.*", "envoy"),
    backend=Selector("gateway-loadtest", "nginx-.*", "nginx"),
    generator=Selector("gateway-loadtest", "locust-worker-.*", "locust"),
)


class FakeClock:
    """Time that passes only when slept through."""

    def __init__(self, start: float = EPOCH) -> None:
        self.now = start
        self.slept = 0.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - EPOCH

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds
            self.slept += seconds


@dataclass
class SimulatedEnvoy:
    """CPU per request `cost_us` at `reference_rps`, falling as (rps / reference_rps) ** (exponent - 1);
    per-second CPU samples with relative noise `noise` (standard deviation); `seed` fixes the noise."""

    cost_us: float = 200.0
    reference_rps: float = 1000.0
    exponent: float = 0.8
    noise: float = 0.03
    seed: int = 1
    limit_cores: float = 0.25

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    def demand_cores(self, rps: float) -> float:
        """Cores Envoy would use to serve `rps` with no limit."""
        if rps <= 0:
            return 0.002
        return rps * self.cost_us * 1e-6 * (rps / self.reference_rps) ** (self.exponent - 1)

    def capacity_rps(self) -> float:
        """The rate at which demand meets the limit."""
        scale = self.cost_us * 1e-6 * self.reference_rps ** (1 - self.exponent)
        return (self.limit_cores / scale) ** (1 / self.exponent)

    def true_knee(self, threshold: float) -> float:
        """The rate at which mean utilization reaches `threshold` (no noise)."""
        scale = self.cost_us * 1e-6 * self.reference_rps ** (1 - self.exponent)
        return (threshold * self.limit_cores / scale) ** (1 / self.exponent)

    def second(self, offered: float, speed: float = 1.0) -> tuple[float, float, float]:
        """One second at `offered` RPS on a machine running at `speed` (1.0: nominal; 0.87: every request
        costs 1 / 0.87 of its nominal CPU): (served RPS, cores used, p99 ms)."""
        capacity = self.capacity_rps() * speed ** (1 / self.exponent)
        served = min(offered, capacity)
        demand = self.demand_cores(served) / speed
        cores = min(self.limit_cores, demand * (1 + self.random.gauss(0, self.noise)))
        utilization = cores / self.limit_cores
        p99 = 2.0 + 3.0 / max(0.02, 1.0 - min(utilization, 0.99)) + (200.0 if offered > capacity else 0.0)
        return served, max(cores, 0.0), p99

    def window(self, index: int, level: LoadLevel, window_s: int = 8, speed: float = 1.0) -> Step:
        """One measured window of `level` (users at 400 RPS each, or a target rate), without the engine, on a
        machine running at `speed` through it."""
        offered = level.target_rps if level.target_rps is not None else level.users * 400.0
        seconds = [self.second(offered, speed) for _ in range(window_s)]
        rps = sum(s for s, _, _ in seconds) / window_s
        cores = [c for _, c, _ in seconds]
        mean = sum(cores) / window_s
        return make_step(
            index,
            users=level.users,
            rps=rps,
            utilization=mean / self.limit_cores,
            target_rps=level.target_rps,
            cpu_utilization_min=min(cores) / self.limit_cores,
            cpu_utilization_max=max(cores) / self.limit_cores,
            envoy_cpu_cores=mean,
            envoy_memory_bytes=30e6,
            p50_ms=2.0,
            p95_ms=max(p for _, _, p in seconds) / 2,
            p99_ms=max(p for _, _, p in seconds),
            requests=round(rps * window_s),
            generator_cpu_max=0.2,
            started_at=float(index * 20),
            window_s=float(window_s),
        )


Second = tuple[float, float, float]  # served RPS, cores used, p99 ms


def pod_shares(pods: int, imbalance: float) -> tuple[float, ...]:
    """Each pod's share of the load: the first takes `imbalance` times the mean pod's, the others the rest evenly."""
    if pods == 1:
        return (1.0,)
    first = imbalance / pods
    return (first, *([(1 - first) / (pods - 1)] * (pods - 1)))


@dataclass
class Timeline:
    """What happened each second: the load offered and what the simulated Envoy made of it, its pods (`fleet`, the
    first is `envoy`) each taking its `shares` of the load."""

    envoy: SimulatedEnvoy
    clock: FakeClock
    offered: float = 0.0
    users: int = 0
    seconds: dict[int, Second] = field(default_factory=dict)  # the fleet's: served and cores summed, worst p99
    generator_share: float = 0.2
    speed: Callable[[int], float] = lambda second: 1.0  # the machine's speed in each second
    fleet: tuple[SimulatedEnvoy, ...] = ()
    shares: tuple[float, ...] = (1.0,)
    pod_seconds: dict[int, tuple[Second, ...]] = field(default_factory=dict)

    def run(self, fleet: tuple[SimulatedEnvoy, ...], shares: tuple[float, ...]) -> None:
        """Envoy's pods from now on."""
        self.advance_to(self.clock.time())
        self.envoy, self.fleet, self.shares = fleet[0], fleet, shares

    def advance_to(self, moment: float) -> None:
        """Simulate every whole second up to `moment`."""
        second = max(self.seconds, default=int(EPOCH) - 1) + 1
        fleet = self.fleet or (self.envoy,)
        while second < int(moment):
            speed = self.speed(second)
            pods = tuple(
                pod.second(self.offered * share, speed) if self.offered > 0 else (0.0, 0.002, 0.0)
                for pod, share in zip(fleet, self.shares, strict=True)
            )
            self.pod_seconds[second] = pods
            self.seconds[second] = (sum(p[0] for p in pods), sum(p[1] for p in pods), max(p[2] for p in pods))
            second += 1

    def window(self, start: float, end: float) -> list[Second]:
        self.advance_to(end)
        return [self.seconds[s] for s in range(int(start), int(end)) if s in self.seconds]

    def pod_window(self, start: float, end: float) -> list[tuple[Second, ...]]:
        self.advance_to(end)
        return [self.pod_seconds[s] for s in range(int(start), int(end)) if s in self.pod_seconds]


class FakeLocust:
    """The load generator's interface, answered from the timeline."""

    def __init__(self, timeline: Timeline, *, fail_swarm: Callable[[], Exception | None] | None = None) -> None:
        self.timeline = timeline
        self.swarms: list[tuple[int, float, str]] = []
        self.fail_swarm = fail_swarm
        self.beats: list[dict[str, Any]] = []

    def swarm(self, users: int, spawn_rate: float, host: str, options: LocustOptions) -> None:
        if self.fail_swarm is not None and (error := self.fail_swarm()) is not None:
            raise error
        self.timeline.advance_to(self.timeline.clock.time())
        self.timeline.users = users
        self.timeline.offered = users * options.user_rps
        self.swarms.append((users, options.user_rps, options.arrivals))

    def stop(self) -> None:
        self.timeline.advance_to(self.timeline.clock.time())
        self.timeline.offered, self.timeline.users = 0.0, 0

    def heartbeat(self, timeout_s: float, state: dict[str, Any]) -> None:
        self.beats.append(state)

    def snapshot(self) -> Snapshot:
        now = self.timeline.clock.time()
        self.timeline.advance_to(now)
        requests = {s: round(v[0]) for s, v in self.timeline.seconds.items()}
        histogram: dict[int, int] = {}
        for served, _, p99 in self.timeline.seconds.values():
            if served:
                histogram[2] = histogram.get(2, 0) + round(served * 0.95)
                histogram[max(3, round(p99))] = histogram.get(max(3, round(p99)), 0) + round(served * 0.05)
        worker = WorkerStatus("w0", "running", self.timeline.users, self.timeline.generator_share * 100)
        state = "running" if self.timeline.users else "stopped"
        return Snapshot(now, state, self.timeline.users, requests, {}, histogram, (worker,), started_at=EPOCH)


class FakeMetrics:
    """The metric source's interface, answered from the timeline; `unreachable` makes every query fail."""

    scrape_interval_s = 1.0

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.unreachable: Callable[[], bool] = lambda: False
        self.queries = 0

    def _query(self) -> None:
        self.queries += 1
        if self.unreachable():
            raise UnreachableError("Prometheus at http://fake failed: ConnectionError", "check that it is running")

    def check(self) -> None:
        self._query()

    def cpu_samples(self, selector: Selector, start: float, end: float) -> int:
        self._query()
        return len(self.timeline.window(start, end)) + 1

    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats:
        self._query()
        seconds = self.timeline.window(start, end)
        if selector != SELECTORS.envoy or not seconds:
            return WindowStats(0.01, 0.01, 0.01)
        cores = [c for _, c, _ in seconds]
        spans = [sum(cores[i : i + 5]) / 5 for i in range(0, max(1, len(cores) - 4))]
        return WindowStats(sum(cores) / len(cores), min(spans), max(spans))

    def cpu_cores_by_pod(self, selector: Selector, start: float, end: float) -> dict[str, float]:
        self._query()
        return {}

    def envoy_rps(self, selector: Selector, start: float, end: float) -> float:
        self._query()
        seconds = self.timeline.window(start, end)
        return sum(s for s, _, _ in seconds) / len(seconds) if seconds else math.nan

    def envoy_cx_rate(self, selector: Selector, start: float, end: float) -> float:
        self._query()
        return 0.0  # keep-alive: the simulated users open their connections before the window

    def envoy_pods(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> dict[str, PodReading]:
        """Each simulated Envoy pod's window, read as cpu_cores, throttled_share and envoy_rps read the fleet's."""
        self._query()
        seconds = self.timeline.pod_window(start, end)
        found = {}
        for index, pod in enumerate(self.timeline.fleet or (self.timeline.envoy,)):
            mine = [second[index] for second in seconds]
            cores = [c for _, c, _ in mine] or [0.01]
            spans = [sum(cores[i : i + 5]) / 5 for i in range(0, max(1, len(cores) - 4))]
            cpu = WindowStats(sum(cores) / len(cores), min(spans), max(spans))
            throttled = sum(1 for c in cores if c >= 0.97 * pod.limit_cores) / len(mine) if mine else None
            rps = sum(s for s, _, _ in mine) / len(mine) if mine else math.nan
            found[f"envoy-simulated-{index}"] = PodReading(cpu, throttled, rps, 0.0)
        return found

    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float:
        self._query()
        return 30e6


class FakePlatform(Platform):
    """A platform whose Envoy is simulated: `envoy_for(config)` builds the simulated Envoy of each
    configuration (once: a later visit finds it as it was, its noise going on); `fail_apply(config)` may
    return an error to raise when it is applied; `speed(second)` is the machine's speed; each apply takes
    `rollout_s`. A configuration of several pods runs copies of its simulated Envoy, the first taking `imbalance`
    times the mean pod's share of the load."""

    name = "fake"

    def __init__(
        self,
        clock: FakeClock,
        envoy_for: Callable[[Configuration], SimulatedEnvoy],
        *,
        fail_apply: Callable[[Configuration], Exception | None] = lambda config: None,
        speed: Callable[[int], float] = lambda second: 1.0,
        rollout_s: float = 2.0,
        imbalance: float = 1.0,
    ) -> None:
        self.clock = clock
        self.rollout_s = rollout_s  # how long an apply takes (a rollout)
        self.envoy_for = envoy_for
        self.fail_apply = fail_apply
        self.imbalance = imbalance
        self.fleets: dict[str, tuple[SimulatedEnvoy, ...]] = {}
        self.timeline = Timeline(SimulatedEnvoy(), clock, speed=speed)
        self._locust = FakeLocust(self.timeline)
        self._metrics = FakeMetrics(self.timeline)
        self.started = self.stopped = 0
        self.applied: list[Configuration] = []
        self.recovered = 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1

    def recover(self) -> list[str]:
        self.recovered += 1
        return []

    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        self.applied.append(config)
        if (error := self.fail_apply(config)) is not None:
            raise error
        fleet = self.fleets.setdefault(config.key, self._fleet(config))
        self.timeline.run(fleet, pod_shares(len(fleet), self.imbalance))
        self.clock.sleep(self.rollout_s)  # a rollout

    def _fleet(self, config: Configuration) -> tuple[SimulatedEnvoy, ...]:
        """The configuration's pods: its simulated Envoy, and for each further pod a copy with noise of its own."""
        first = self.envoy_for(config)
        return (first, *(replace(first, seed=first.seed + 1000 * i) for i in range(1, config.envoy_replicas)))

    @property
    def locust(self) -> FakeLocust:
        return self._locust

    @property
    def metrics(self) -> FakeMetrics:
        return self._metrics

    @property
    def selectors(self) -> Selectors:
        return SELECTORS

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints("http://gateway", "http://locust", "http://prometheus", "http://backend")

    def capacities(self) -> Capacities:
        return Capacities(generator_cores=1.0, backend_cores=None)

    def describe(self) -> dict[str, Any]:
        return {"versions": {"envoy": "simulated"}}

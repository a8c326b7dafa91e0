"""The measurement model, one set of types from the meter to the report.

A `Step` is what one measuring window saw (each Envoy pod's part: runner.pod_window); a `ConfigResult` holds a
configuration's steps, its knee and knee per pod (runner.knee_model), capacity and its verdict; a `MemoryResult`
holds the memory model's points (their types live in runner.memory_model; runner.records says how every record
saves and loads); a `RunSummary` is a whole run, as saved in summary.json. The engine writes these types and the
report reads the same ones back. Pure data: this module imports pydantic (and the traffic profile, itself pure
data) and nothing of the Prometheus, Locust or Kubernetes stacks.

Runs saved by earlier versions still load: fields added since have defaults, and renamed ones keep their
saved names as aliases (`envoy.cpu` is `EnvoyResources.cpu_cores`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

# The knee's records, imported from here as well as from runner.knee_model
from runner.knee_model import PLATEAU_EXPONENT as PLATEAU_EXPONENT
from runner.knee_model import Knee as Knee
from runner.knee_model import PodKnee as PodKnee

# The memory model's types, imported from here as well as from runner.memory_model
from runner.memory_model import MemoryPoint as MemoryPoint
from runner.memory_model import MemoryResult
from runner.memory_model import RouteProgramming as RouteProgramming
from runner.memory_model import percentile as percentile
from runner.pod_window import PodWindow
from runner.profiles import PLAIN_PROFILE, TrafficProfile
from runner.records import Frozen, Mutable

ConfigStatus = Literal["running", "saturated", "not-saturated", "invalid", "failed"]
RunStatus = Literal["running", "complete", "partial", "interrupted", "failed"]
FINISHED: tuple[str, ...] = ("saturated", "not-saturated", "invalid")
Regime = Literal["steady", "throttled"]
# A window with at least this share of its CFS periods throttled ran in the throttled regime. Measured with an
# open-loop generator at 250m and 500m (bench/noise.py, 2026-11-25): steady windows up to 90% utilization had
# 0-7% of periods throttled and p99 1-9 ms; the others 17-92%, p99 40-160 ms, and at 250m some of them 20-30%
# more CPU per request at the same rate. Under Locust's Poisson users windows at 90-95% had 19-41% throttled
# at an ordinary cost: the regime says where Envoy works against its quota, not that a window is wrong.
THROTTLED_REGIME = 0.15
# How arrivals were spaced when a run did not say (runs saved before arrival models were named).
LEGACY_ARRIVALS = "synchronized"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class LoadLevel(Frozen):
    """What Locust is asked to do: `users` users, each paced at `user_rps` (0 = closed loop, no wait)."""

    users: int
    user_rps: float = 0.0

    @property
    def target_rps(self) -> float | None:
        return self.users * self.user_rps if self.user_rps > 0 else None

    @property
    def offered(self) -> float:
        """The load offered: the target RPS when paced, else the number of closed-loop users."""
        target = self.target_rps
        return target if target is not None else float(self.users)


class Finding(Frozen):
    """A validity guard that fired: its name, what it saw, and what to change."""

    guard: str
    detail: str
    advice: str

    @property
    def message(self) -> str:
        return f"{self.detail}: {self.advice}"


class Step(Frozen):
    """What one measuring window saw.

    Utilization is Envoy's CPU over its CPU limit (mean over the window; min and max over sub-windows), of
    the busiest pod when the fleet has several (each of min, mean and max the highest over the pods; `pods`
    holds every pod's own figures); `envoy_cpu_cores`, `rps` and `envoy_rps` are the fleet's, summed over its
    pods; `throttled_share` is the share of CFS periods in which the busiest pod was throttled (None: not
    published);
    `generator_cpu_max` and `backend_cpu_max` are the busiest Locust worker's and nginx replica's share of
    the CPU they have; `guards` lists the validity guards that fired (see runner.guards).
    """

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
    throttled_share: float | None = None
    envoy_cx_rate: float | None = None  # new downstream connections per second Envoy accepted (None: not read)
    guards: tuple[Finding, ...] = ()
    round: int = 1  # the round of the sweep it was measured in (runs before rounds had one)
    control: bool = False  # the run's control window: one configuration at one fixed rate, every round
    probe: bool = False  # a capacity probe of a later round: past the knee, to find where Envoy breaks
    steal_share: float | None = None  # share of the machine's CPU time its hypervisor stole (None: not read)
    pods: tuple[PodWindow, ...] = ()  # each Envoy pod's own figures (runs before per-pod windows: none)

    @property
    def regime(self) -> Regime | None:
        """`throttled` when Envoy spent the window in CFS throttling (THROTTLED_REGIME of its periods or more:
        requests queue, p99 jumps and, under a sub-core quota, CPU per request rises), else `steady`; None
        when the platform publishes no throttling counter."""
        if self.throttled_share is None:
            return None
        return "throttled" if self.throttled_share >= THROTTLED_REGIME else "steady"

    @property
    def offered(self) -> float:
        """The load offered: the target RPS in open-loop mode, else the number of closed-loop users."""
        return self.target_rps if self.target_rps is not None else float(self.users)

    @property
    def delivered(self) -> float | None:
        """Share of the offered RPS that was served (None in closed-loop mode, where nothing is offered)."""
        return self.rps / self.target_rps if self.target_rps else None

    @property
    def cpu_per_request_us(self) -> float | None:
        """Envoy CPU time per request it served, in microseconds."""
        return self.envoy_cpu_cores / self.envoy_rps * 1e6 if self.envoy_rps > 0 else None

    @property
    def connections_per_request(self) -> float | None:
        """New connections Envoy accepted per request it served (1.0 when every request opens one)."""
        return self.envoy_cx_rate / self.envoy_rps if self.envoy_cx_rate is not None and self.envoy_rps > 0 else None


class Capacity(Frozen):
    """Where it breaks: the highest offered rate served in full (within the delivery tolerance) with p99
    under the latency SLO `slo_ms`, and the lowest rate above it that was not (None: none measured); with
    three rounds or more, the 95% interval `low`-`high` from the scatter between `rounds` rounds (runner.capacity);
    `transients`: the windows that broke and were dropped, each with why."""

    rps: float
    broken_at: float | None = None
    broken_by: str | None = None
    low: float | None = None
    high: float | None = None
    rounds: int | None = None
    slo_ms: float | None = None  # runs before 2026-11-28 did not record it (the scenario's load.latency_slo_ms)
    transients: tuple[str, ...] = ()

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.low, self.high) if self.low is not None and self.high is not None else None

    @property
    def resolution(self) -> float | None:
        """How far above `rps` the first broken rate is, as a share (0.05: capacity within 5%)."""
        return self.broken_at / self.rps - 1 if self.broken_at and self.rps > 0 else None


class EnvoyResources(Frozen):
    """One Envoy pod's limits and worker threads, and how many such pods the configuration ran."""

    cpu_cores: float = Field(alias="cpu")
    memory: str
    concurrency: int  # as asked: a number, 0 Envoy's default (one per CPU of its node), -1 the production gateway's
    replicas: int = 1  # runs before the fleet axis had one pod
    threads: int | None = None  # the worker threads Envoy ran with, as read (None: not read; `concurrency` says)

    @property
    def fleet_cpu_cores(self) -> float:
        """The CPU limit of all the pods together."""
        return self.cpu_cores * self.replicas


class BackendResources(Frozen):
    replicas: int


class ContourResources(Frozen):
    cpu_cores: float | None = Field(default=None, alias="cpu")
    memory: str | None = None


class ConfigResult(Mutable):
    """One configuration's outcome. `status` is `running` until it ends."""

    key: str
    label: str
    envoy: EnvoyResources
    backend: BackendResources
    contour: ContourResources | None = None
    arrivals: str = LEGACY_ARRIVALS
    profile: TrafficProfile = PLAIN_PROFILE  # runs before traffic profiles were plain HTTP with keep-alive
    status: ConfigStatus = "running"
    reason: str | None = None
    knee: Knee | None = None
    pod_knee: PodKnee | None = None  # the knee per pod (runs before per-pod windows: none)
    capacity: Capacity | None = None
    search: str | None = None  # how the search ended: the interval reached, or the budget spent
    machine_speed: float | None = None  # reference loop on Envoy's CPUs before the load, M iterations/s
    # What the run decided with, recorded for the report (None: runs before these were recorded; the report falls
    # back to the run's scenario.yaml, runner.report.recorded): the Accept-Encoding its clients sent, and the
    # Prometheus scrape interval its guards judged the windows with (rps-mismatch).
    accept_encoding: str | None = None
    scrape_interval_s: float | None = None
    steps: list[Step] = []
    started_at: str | None = None
    finished_at: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _key_names_arrivals(cls, data: Any) -> Any:
        """Keys saved before arrival models were named lack them: add the legacy model's."""
        if isinstance(data, dict) and "key" in data and ",arrivals=" not in str(data["key"]):
            data = {**data, "key": f"{data['key']},arrivals={data.get('arrivals', LEGACY_ARRIVALS)}"}
        return data

    def fail(self, reason: str) -> None:
        self.status, self.reason, self.finished_at = "failed", reason, utc_now()

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def valid_knee(self) -> Knee | None:
        """The knee when it counts: the configuration ended `saturated` (no guard fired up to it)."""
        return self.knee if self.status == "saturated" else None

    @property
    def knee_per_core(self) -> float | None:
        """The valid knee's RPS per core of the CPU limit (of all its pods together)."""
        knee = self.valid_knee
        return knee.per_core(self.envoy.fleet_cpu_cores) if knee is not None else None

    @property
    def knee_per_core_interval(self) -> tuple[float, float] | None:
        """The valid knee's 95% interval per core of the CPU limit (of all its pods together)."""
        knee = self.valid_knee
        if knee is None or knee.interval is None:
            return None
        low, high = knee.interval
        return low / self.envoy.fleet_cpu_cores, high / self.envoy.fleet_cpu_cores

    @property
    def valid_pod_knee(self) -> PodKnee | None:
        """The knee per pod when the configuration's knee counts."""
        return self.pod_knee if self.status == "saturated" else None

    @property
    def capacity_over_knee(self) -> float | None:
        """Capacity against the valid knee (0.12: Envoy served 12% more than the knee before it broke; below 0:
        latency broke before the CPU threshold); None without both."""
        knee = self.valid_knee
        if knee is None or self.capacity is None or self.status == "failed":
            return None
        return self.capacity.rps / knee.rps - 1

    def knee_cpu_per_request_us(self, threshold: float) -> float | None:
        """Envoy's CPU time per request at the valid knee, in microseconds: `threshold` of the limit over the
        knee's RPS."""
        per_core = self.knee_per_core
        return threshold / per_core * 1e6 if per_core else None


class BaselineResult(Frozen):
    """The backend directly vs through the gateway, same generator and closed-loop users."""

    users: int
    envoy_cpu_cores: float = Field(alias="envoy_cpu")
    direct: Step
    gateway: Step

    @property
    def overhead(self) -> float:
        """Share of direct throughput lost by going through the gateway (0.2 = 20%)."""
        return 1 - self.gateway.rps / self.direct.rps if self.direct.rps > 0 else 0.0

    @property
    def gateway_share(self) -> float:
        """Throughput through the gateway as a share of direct (the reference's "over 80%")."""
        return 1 - self.overhead


class Machine(Frozen):
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = None
    memory_bytes: int | None = None
    kernel: str | None = None
    os: str | None = None
    python: str | None = None
    gateway_sizer: str | None = None


class Isolation(Frozen):
    """Which CPUs Envoy and everything else ran on (local platform), or how the node pins Envoy."""

    envoy_cpus: str | None = None
    others_cpus: str | None = None
    cpu_manager_policy: str | None = None  # kubernetes: the kubelet's CPU manager policy, when readable
    note: str = ""


class Node(Frozen):
    name: str
    cpu: str | None = None
    memory: str | None = None
    kernel: str | None = None
    runtime: str | None = None
    cpu_model: str | None = None


class EnvoyWorkload(Frozen):
    """The Envoy workload a Kubernetes run found and sized (its kind as found, also when the scenario said
    `auto`): the selector of its pods, how many it ran before the run (a DaemonSet: the nodes it is scheduled on),
    and what provisions it when that is not its own manifest (`ContourDeployment ns/name`)."""

    kind: Literal["DaemonSet", "Deployment"]
    namespace: str
    name: str
    container: str
    selector: dict[str, str] = {}
    pods: int | None = None
    provisioned_by: str | None = None


class FleetFacts(Frozen):
    """What a kubernetes run measured: a sizing fleet beside the production gateway (copied from it), or the
    production gateway itself (live); production's own `--concurrency` (None: unset, one per CPU of its node)."""

    target: str
    workload: str
    copied_from: str | None = None
    differences: tuple[str, ...] = ()
    production_concurrency: int | None = None


class Environment(Frozen):
    """The machine, the components' versions and the platform's own facts, for the environment table."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    machine: Machine = Machine()
    versions: dict[str, str | None] = {}
    cgroup_version: int | None = None
    isolation: Isolation | None = None
    kubernetes: str | None = None
    api_server: str | None = None
    nodes: tuple[Node, ...] = ()
    envoy_workload: EnvoyWorkload | None = None  # kubernetes: the Envoy workload as found (None: earlier runs)
    overrides: dict[str, str] = {}
    fleet: FleetFacts | None = None


class RoundRecord(Mutable):
    """One round of the sweep: the order its configurations were visited in (their keys) and those done."""

    number: int
    order: list[str]
    visited: list[str] = []


class ControlWindow(Frozen):
    """The run's control: one configuration (its key) at one offered load, measured in every round."""

    key: str
    offered: float


class RoundsRecord(Mutable):
    """How the sweep interleaved its configurations: the seed of the shuffled orders, the rounds planned
    (at least, and at most while an interval is wider than its target) and each round as it ran."""

    seed: int
    planned: int
    max_rounds: int
    control: ControlWindow | None = None
    rounds: list[RoundRecord] = []

    def round(self, number: int) -> RoundRecord | None:
        return next((r for r in self.rounds if r.number == number), None)


class RunSummary(Mutable):
    """One run of the sweep: what ran where, and every configuration's result."""

    run_id: str
    platform: str
    scenario: str
    status: RunStatus = "running"
    reason: str | None = None
    threshold: float
    started_at: str
    finished_at: str | None = None
    environment: Environment = Environment()
    configs: list[ConfigResult] = []
    baseline: BaselineResult | None = None
    memory: MemoryResult | None = None  # the memory model, when the scenario has a `memory` section
    rounds: RoundsRecord | None = None  # how configurations were interleaved (None: runs before rounds)
    limit_changes: str | None = None  # how Envoy's limits changed between visits (in place, or by restarts/rollouts)

    def config(self, key: str) -> ConfigResult | None:
        return next((c for c in self.configs if c.key == key), None)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True)

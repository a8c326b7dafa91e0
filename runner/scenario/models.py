"""The scenario's models: frozen, typed, validated once; units in attribute names (`cpu_cores`, `step_s`), the
YAML's short Kubernetes-style keys as aliases (`cpu: 500m`, `step_seconds: 10`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from runner.http import RETRY_BUDGET_S, redact_url
from runner.profiles import PLAIN_PROFILE, ProfileList
from runner.quantities import format_cpu
from runner.scenario.fields import (
    ArrivalsList,
    BytesList,
    ClassName,
    ConcurrencyList,
    ConnectionCounts,
    CoresList,
    DnsLabel,
    DnsSubdomain,
    Float,
    HeaderValue,
    HostName,
    Image,
    Int,
    Locustfile,
    Name,
    OptionalBytes,
    OptionalCores,
    PathText,
    Rates,
    ReplicaCounts,
    RequestPath,
    RouteCounts,
    ServiceName,
    Text,
    Url,
    UserCounts,
    at_most,
)
from runner.scenario.gateway import GatewayRef, provisioned_names
from runner.scenario.limits import (
    DEFAULT_THRESHOLD,
    MAX_CONFIGURATIONS,
    MAX_LATENCY_SLO_MS,
    MAX_NGINX_WORKER_PROCESSES,
    MAX_OPEN_RATE,
    MAX_OVERLOAD_CONNECTIONS,
    MAX_REFRESH_SECONDS,
    MAX_ROUND_COUNT,
    MAX_ROUTE_PROBES,
    MAX_RPS,
    MAX_SCRAPE_INTERVAL_SECONDS,
    MAX_SECONDS_PER_CONFIG,
    MAX_SEED,
    MAX_SPAWN_RATE,
    MAX_STEP_SECONDS,
    MAX_STEPS,
    MAX_USERS,
    MAX_WAIT_SECONDS,
    MAX_WINDOWS_PER_ROUND,
    MAX_WORKERS,
    MIN_HOLD_SECONDS,
    MIN_LOCAL_CPU_CORES,
    MIN_REFRESH_SECONDS,
    MIN_RPS_PER_USER,
    MIN_SPAWN_RATE,
)
from runner.scenario.placement import SizingSpec, Target, WorkerPlacement, check_target
from runner.scenario.threads import default_threads, threads_for
from runner.scenario.windows import sized_to_scrapes


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class WorkloadRef(_Model):
    """A Kubernetes workload and the container in it that the sweep patches."""

    namespace: DnsLabel
    name: DnsSubdomain
    container: DnsLabel
    kind: Literal["auto", "DaemonSet", "Deployment"] = "auto"


class ServiceRef(_Model):
    """A Kubernetes Service and port, reached through the API server's service proxy."""

    namespace: DnsLabel
    name: ServiceName
    port: Int = Field(ge=1, le=65535)


class Resources(_Model):
    """CPU and memory of one container (limits; requests equal them for Guaranteed QoS)."""

    cpu_cores: OptionalCores = Field(default=None, alias="cpu")
    memory_bytes: OptionalBytes = Field(default=None, alias="memory")


class OverloadSpec(_Model):
    """Envoy's overload manager, as `contour bootstrap --overload-downstream-max-conn` and
    `--overload-max-heap` set it (local platform): a cap on active downstream connections, and a heap size
    at which Envoy shrinks its heap (95%) and stops accepting requests (98%)."""

    max_connections: Int | None = Field(default=None, ge=1, le=MAX_OVERLOAD_CONNECTIONS)
    max_heap_bytes: OptionalBytes = Field(default=None, alias="max_heap")

    @model_validator(mode="after")
    def _something_set(self) -> OverloadSpec:
        if self.max_connections is None and self.max_heap_bytes is None:
            raise ValueError("set max_connections, max_heap or both (or leave overload out)")
        return self


class EnvoySpec(_Model):
    """The gateway's data plane: the limits to sweep and where it runs."""

    cpu_cores: CoresList = Field(alias="cpu")
    memory_bytes: BytesList = Field(default=(512 * 2**20,), alias="memory")
    # worker threads, one axis of the sweep: `auto` (one per started core of the limit), `default` (Envoy's own: one
    # per CPU of the node), `production` (what the production gateway runs: kubernetes), or a number. Unset: `auto`
    # locally, `production` on kubernetes
    concurrency: ConcurrencyList = ("auto",)
    # Envoy pods (local: processes sharing one listener port) per configuration, each with the CPU and memory
    # limit of the configuration: a sweep axis like the CPU list
    replicas: ReplicaCounts = (1,)
    guaranteed_qos: bool = True
    isolation: Literal["auto", "off"] = "auto"  # local: Envoy alone on its own CPUs when there are enough
    workload: WorkloadRef = WorkloadRef(namespace="projectcontour", name="envoy", container="envoy")
    overload: OverloadSpec | None = None

    def concurrency_for(self, cpu_cores: float, threads: int | str | None = None) -> int:
        """Envoy worker threads for a CPU limit, of `threads` (default: the first of the axis): see
        runner/scenario/threads.py."""
        return threads_for(self.concurrency[0] if threads is None else threads, cpu_cores)


class ContourSpec(_Model):
    """The control plane (kubernetes only): resource settings to sweep, null to leave it alone."""

    resources: Annotated[
        tuple[Resources, ...] | None, BeforeValidator(at_most(MAX_CONFIGURATIONS, "Contour resource settings"))
    ] = None
    workload: WorkloadRef = WorkloadRef(namespace="projectcontour", name="contour", container="contour")


class BackendSpec(_Model):
    """The nginx backend behind the gateway."""

    replicas: ReplicaCounts = (1,)
    cpu_cores: OptionalCores = Field(default=None, alias="cpu")
    memory_bytes: OptionalBytes = Field(default=None, alias="memory")
    worker_processes: Int = Field(default=1, ge=1, le=MAX_NGINX_WORKER_PROCESSES)
    response_status: Int = Field(default=200, ge=200, le=599)
    workload: WorkloadRef = WorkloadRef(namespace="gateway-loadtest", name="nginx", container="nginx")

    @property
    def max_replicas(self) -> int:
        """The largest replica count of the sweep: what the baseline and the memory experiment run with, and the
        ports the local test bed must have free."""
        return max(self.replicas)


class LoadSpec(_Model):
    """How Locust drives the gateway and how the load is stepped."""

    client: Literal["fasthttp", "lean"] = "lean"
    locustfile: Locustfile = Path("locustfiles/gateway.py")
    user_class: ClassName | None = None
    host_header: HostName = "external.nginx"
    path: RequestPath = "/"
    workers: Int = Field(default=2, ge=1, le=MAX_WORKERS)
    # the local platform's CPU limit for each Locust worker (a CFS quota); None: no limit, judged as one core.
    # On Kubernetes a worker's limit is kubernetes.worker_resources
    worker_cpu_cores: OptionalCores = Field(default=None, alias="worker_cpu")
    mode: Literal["users", "rps"] = "rps"
    arrivals: ArrivalsList = ("poisson",)
    accept_encoding: HeaderValue = "gzip, deflate, br"
    search: Literal["adaptive", "ramp", "fixed"] = "adaptive"
    users: UserCounts = (4, 8, 12, 16)
    rps: Rates | None = None
    start_users: Int = Field(default=1, ge=1, le=MAX_USERS)
    start_rps: Float | None = Field(default=None, gt=0, le=MAX_RPS)  # None: START_RPS_PER_CORE x the CPU limit
    start_rps_per_core: Float = Field(default=2000.0, gt=0, le=MAX_RPS)
    max_rps_per_user: Float = Field(default=20.0, ge=MIN_RPS_PER_USER, le=MAX_RPS)
    spawn_rate: Float = Field(default=100.0, ge=MIN_SPAWN_RATE, le=MAX_SPAWN_RATE)
    step_s: Float = Field(default=10.0, ge=1, le=MAX_STEP_SECONDS, alias="step_seconds")
    warmup_s: Float = Field(default=5.0, ge=0, le=MAX_WAIT_SECONDS, alias="warmup_seconds")
    settle_s: Float = Field(default=3.0, ge=0, le=MAX_WAIT_SECONDS, alias="settle_seconds")
    max_steps: Int = Field(default=12, ge=2, le=MAX_STEPS)
    rounds: Int = Field(default=5, ge=1, le=MAX_ROUND_COUNT)  # interleaved rounds over every configuration
    max_rounds: Int | None = Field(default=None, ge=1, le=MAX_ROUND_COUNT)  # more while a knee's interval is too wide
    windows_per_round: Int = Field(default=2, ge=1, le=MAX_WINDOWS_PER_ROUND)  # per configuration, after round 1
    seed: Int | None = Field(default=None, ge=0, le=MAX_SEED)  # the rounds' shuffled order; None: from the run id
    max_config_s: Float = Field(default=600.0, gt=0, le=MAX_SECONDS_PER_CONFIG, alias="max_seconds_per_config")
    # rounds past `rounds` (up to max_rounds) start only while the run has measured less than this; None: no limit
    more_rounds_within_s: Float | None = Field(
        default=None, gt=0, le=MAX_SECONDS_PER_CONFIG, alias="more_rounds_within_seconds"
    )
    knee_interval: Float = Field(default=0.08, gt=0, le=0.5)  # the 95% interval a knee should reach: +-this share
    capacity_resolution: Float = Field(default=0.05, gt=0, le=1)  # capacity bracketed to within this share
    latency_slo_ms: Float = Field(default=250.0, gt=0, le=MAX_LATENCY_SLO_MS)  # p99 above this: past capacity

    @property
    def round_limit(self) -> int:
        """The most rounds a configuration gets: `max_rounds` when set (never fewer than `rounds`)."""
        return max(self.rounds, self.max_rounds or self.rounds)

    @model_validator(mode="after")
    def _ramp_needs_schedule(self) -> LoadSpec:
        if self.search in ("ramp", "fixed") and self.mode == "rps" and not self.rps:
            raise ValueError(f"search: {self.search} with mode: rps needs a list of target rates under load.rps")
        return self


class BaselineSpec(_Model):
    """The backend measured directly (no gateway) and through it, with the same closed-loop load."""

    enabled: bool = False
    users: Int = Field(default=20, ge=1, le=MAX_USERS)
    envoy_cpu_cores: OptionalCores = Field(default=None, alias="envoy_cpu")  # None: the sweep's largest

    def envoy_cpu_for(self, cpus: tuple[float, ...]) -> float:
        return self.envoy_cpu_cores if self.envoy_cpu_cores is not None else max(cpus)


class MemorySpec(_Model):
    """The memory model: Envoy's working set at held idle connections and at extra routes.

    Each entry of `connections` is a point with that many idle keep-alive connections held through the
    gateway and no extra route; each entry of `routes` a point with that many extra virtual hosts and no
    held connection. Every point runs `rps` of light load beside them, restarts Envoy at `cpu`/`memory`
    (default: the sweep's largest), opens the connections at `open_rate` per second, waits
    `settle_seconds` and measures `hold_seconds`. Held connections each send a request every
    `refresh_seconds`, inside Envoy's 60 s idle timeout. `only: true` skips the knee configurations.
    On Kubernetes the routes are HTTPProxies added to the running gateway, the last `route_probes` of
    each point created one at a time and timed until Envoy serves them.
    """

    connections: ConnectionCounts = ()
    routes: RouteCounts = ()
    rps: Float = Field(default=50.0, ge=0, le=MAX_RPS)
    hold_s: Float = Field(default=30.0, ge=MIN_HOLD_SECONDS, le=MAX_STEP_SECONDS, alias="hold_seconds")
    settle_s: Float = Field(default=10.0, ge=0, le=MAX_WAIT_SECONDS, alias="settle_seconds")
    refresh_s: Float = Field(default=25.0, ge=MIN_REFRESH_SECONDS, le=MAX_REFRESH_SECONDS, alias="refresh_seconds")
    open_rate: Float = Field(default=2000.0, ge=1, le=MAX_OPEN_RATE)
    route_probes: Int = Field(default=20, ge=0, le=MAX_ROUTE_PROBES)
    cpu_cores: OptionalCores = Field(default=None, alias="cpu")
    memory_bytes: OptionalBytes = Field(default=None, alias="memory")
    only: bool = False

    @model_validator(mode="after")
    def _has_points(self) -> MemorySpec:
        if not self.connections and not self.routes:
            raise ValueError(
                "list connection counts (connections: [1000, 5000]), route counts (routes: [0, 500]) or both"
            )
        return self

    def cpu_for(self, cpus: tuple[float, ...]) -> float:
        """Envoy's CPU limit at the memory points: `cpu`, or the sweep's largest."""
        return self.cpu_cores if self.cpu_cores is not None else max(cpus)

    def memory_for(self, memories: tuple[int, ...]) -> int:
        """Envoy's memory limit at the memory points: `memory`, or the sweep's largest."""
        return self.memory_bytes if self.memory_bytes is not None else max(memories)


class PrometheusSpec(_Model):
    """Where metrics come from: a URL, or (null) the platform's own Prometheus."""

    url: Url | None = None
    scrape_interval_s: Float = Field(default=1.0, gt=0, le=MAX_SCRAPE_INTERVAL_SECONDS, alias="scrape_interval_seconds")
    service: ServiceRef = ServiceRef(namespace="monitoring", name="prometheus", port=9090)
    # how long a query keeps retrying a refused connection, a timeout or a 502-504 before the configuration fails
    retry_s: Float = Field(default=RETRY_BUDGET_S, ge=1, le=MAX_WAIT_SECONDS, alias="retry_seconds")


class KubernetesSpec(_Model):
    """Cluster access and the Locust objects the kubernetes platform creates.

    Unset image, pull policy and worker resources come from the optional ConfigMap
    `gateway-sizer-defaults` in `namespace` (the one-machine cluster installs one), else from
    locustio/locust:2.47.0, IfNotPresent and 1 CPU / 512Mi per worker.
    """

    kubeconfig: PathText | None = None
    context: PathText | None = None
    namespace: DnsLabel = "gateway-loadtest"
    locust_image: Image | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    worker_resources: Resources | None = None
    gateway: GatewayRef = GatewayRef()
    gateway_url: Url = "http://envoy.projectcontour.svc.cluster.local"
    rollout_timeout_s: Float = Field(default=180.0, gt=0, le=MAX_WAIT_SECONDS, alias="rollout_timeout_seconds")
    keep_locust: bool = False
    # what is measured: a sizing fleet of the run's own beside the production gateway, or (with --live too) the
    # production gateway itself (runner/scenario/placement.py)
    target: Target = "sizing"
    sizing: SizingSpec = SizingSpec()
    worker_placement: WorkerPlacement = WorkerPlacement()

    @property
    def live(self) -> bool:
        return self.target == "live"


class Scenario(_Model):
    """One sweep: what to vary, how to load it, where to run it."""

    name: Name
    description: Text = ""
    platform: Literal["local", "kubernetes"] = "local"
    envoy: EnvoySpec
    contour: ContourSpec = ContourSpec()
    backend: BackendSpec = BackendSpec()
    load: LoadSpec = LoadSpec()
    profiles: ProfileList = (PLAIN_PROFILE,)  # traffic profiles (runner.profiles): one axis of the sweep
    threshold: Float = Field(default=DEFAULT_THRESHOLD, gt=0, le=1)
    on_failure: Literal["continue", "stop"] = "continue"  # after a configuration fails
    baseline: BaselineSpec = BaselineSpec()
    memory: MemorySpec | None = None
    prometheus: PrometheusSpec = PrometheusSpec()
    kubernetes: KubernetesSpec = KubernetesSpec()

    def dump(self) -> dict[str, Any]:
        """The resolved scenario as YAML-ready data, with the file's own keys; a prometheus.url's
        credentials are redacted (the dump is saved in the run directory)."""
        data = self.model_dump(mode="json", by_alias=True)
        if data["prometheus"]["url"]:
            data["prometheus"]["url"] = redact_url(data["prometheus"]["url"])
        return data

    @model_validator(mode="after")
    def _bounded_plan(self) -> Scenario:
        lists = {
            "envoy.cpu": len(self.envoy.cpu_cores),
            "envoy.replicas": len(self.envoy.replicas),
            "envoy.concurrency": len(self.envoy.concurrency),
            "envoy.memory": len(self.envoy.memory_bytes),
            "contour.resources": len(self.contour.resources or (None,)),
            "backend.replicas": len(self.backend.replicas),
            "load.arrivals": len(self.load.arrivals),
            "profiles": len(self.profiles),
        }
        if math.prod(lists.values()) > MAX_CONFIGURATIONS:
            product = " x ".join(f"{count} {name}" for name, count in lists.items() if count > 1)
            raise ValueError(
                f"{product} make {math.prod(lists.values()):,} configurations; at most {MAX_CONFIGURATIONS:,}"
            )
        return self

    @model_validator(mode="after")
    def _windows_hold_scrapes(self) -> Scenario:
        """Windows (and the time budget) the scenario leaves unset sized to its scrape interval (windows.py)."""
        load = self.load
        update = sized_to_scrapes(
            load.step_s, load.max_config_s, load.model_fields_set, self.prometheus.scrape_interval_s
        )
        return self.model_copy(update={"load": load.model_copy(update=update)}) if update else self

    @model_validator(mode="before")
    @classmethod
    def _provisioned_names(cls, data: Any) -> Any:
        return default_threads(provisioned_names(data))

    @model_validator(mode="after")
    def _provisioned_runnable(self) -> Scenario:
        """What a provisioned gateway does not run yet, refused before anything starts."""
        if self.platform != "kubernetes" and self.kubernetes.gateway.provisioned:
            raise ValueError("kubernetes.gateway.kind: gateway needs platform: kubernetes")
        if not self.kubernetes.gateway.provisioned:
            return self
        unsupported = {
            "contour.resources": self.contour.resources is not None,
            "memory.routes": bool(self.memory and self.memory.routes),
        }
        for what, asked in unsupported.items():
            if asked:
                raise ValueError(
                    f"{what}: not measured on a provisioned gateway (kubernetes.gateway.kind: gateway) yet; "
                    "size them on a Contour installed with HTTPProxy (kind: httpproxy)"
                )
        if self.kubernetes.live:  # a sizing fleet's TLS listeners go on the run's own Gateway, a ClusterIP one
            self.kubernetes.gateway.refuse_tls_listeners([profile.name for profile in self.profiles if profile.tls])
        return self

    @model_validator(mode="after")
    def _target_runnable(self) -> Scenario:
        k8s = self.kubernetes
        sizes_contour = self.contour.resources is not None
        check_target(self.platform, k8s.target, self.envoy.concurrency, sizes_contour, not k8s.gateway.provisioned)
        return self

    @model_validator(mode="after")
    def _profiles_runnable(self) -> Scenario:
        """A profile the platform or the client cannot run is refused before anything starts."""
        for index, profile in enumerate(self.profiles):
            if profile.new_connection and self.load.client != "lean":
                raise ValueError(
                    f"profiles[{index}] ({profile.name}): a new connection per request needs load.client: lean"
                )
        return self

    @model_validator(mode="after")
    def _local_only(self) -> Scenario:
        """The overload settings are built for the local platform so far."""
        if self.platform == "local":
            return self
        if self.envoy.overload is not None:
            raise ValueError(
                "envoy.overload: applies to the local platform only; on Contour pass contour bootstrap "
                "--overload-downstream-max-conn and --overload-max-heap (gateway-sizer recommend prints them)"
            )
        if self.load.worker_cpu_cores is not None:
            raise ValueError(
                "load.worker_cpu: applies to the local platform only; on Kubernetes set "
                "kubernetes.worker_resources (cpu, memory)"
            )
        return self

    @model_validator(mode="after")
    def _local_cpu_floor(self) -> Scenario:
        if self.platform != "local":
            return self
        limits = {
            "envoy.cpu": min(self.envoy.cpu_cores),
            "backend.cpu": self.backend.cpu_cores,
            "load.worker_cpu": self.load.worker_cpu_cores,
            "baseline.envoy_cpu": self.baseline.envoy_cpu_cores,
            "memory.cpu": self.memory.cpu_cores if self.memory else None,
        }
        for name, cores in limits.items():
            if cores is not None and cores < MIN_LOCAL_CPU_CORES:
                raise ValueError(
                    f"{name}: {format_cpu(cores)} is below 10m, the smallest CPU limit of the local platform "
                    "(a 1 ms CFS quota per 100 ms)"
                )
        return self

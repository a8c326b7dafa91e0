"""Scenarios: a YAML file plus command-line overrides, validated once into frozen typed objects.

Units live in attribute names (`cpu_cores`, `memory_bytes`, `step_s`); the YAML keeps the short
Kubernetes-style keys (`cpu: 500m`, `memory: 1Gi`, `step_seconds: 10`).

Every count, size and duration has an upper bound (the MAX_* constants below, listed in the README): a value
beyond one is a typo or hostile input, never a sweep, and is refused before anything starts.
"""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)

from runner.errors import ScenarioError, UsageError
from runner.http import RETRY_BUDGET_S, redact_url
from runner.paths import PROJECT_ROOT, SCENARIO_DIR
from runner.profiles import PLAIN_PROFILE, ProfileList
from runner.quantities import format_cpu, format_memory, parse_cpu, parse_memory, parse_number_list, short_repr

DEFAULT_THRESHOLD = 0.90
DEFAULT_SCENARIO = "local"

# Bounds. A sweep is the product of its lists, so the plan is bounded too; durations bound the time a step holds load.
MAX_CONFIGURATIONS = 1000  # Envoy CPUs x memories x Contour resources x nginx replicas x arrivals x profiles
MIN_CPU_CORES = 0.001  # 1m, Kubernetes' resolution; CPU values are whole millicores
MIN_LOCAL_CPU_CORES = 0.01  # 10m: a 1 ms CFS quota per 100 ms period, the smallest the local platform sets
MAX_CPU_CORES = 512.0  # any CPU limit or request: Envoy, Contour, nginx, Locust workers
MAX_CONCURRENCY = 512  # Envoy worker threads
MIN_MEMORY_BYTES = 2**20  # 1Mi
MAX_MEMORY_BYTES = 2**42  # 4Ti
MAX_REPLICAS = 256  # nginx replicas
MAX_NGINX_WORKER_PROCESSES = 64
MAX_WORKERS = 256  # Locust workers (local processes or pods)
MAX_USERS = 100_000  # Locust users in one step (also start_users and baseline.users)
MAX_RPS = 10_000_000.0  # any target rate: load.rps, start_rps, start_rps_per_core, max_rps_per_user
MIN_RPS_PER_USER = 0.1  # max_rps_per_user below this asks for more users than MAX_USERS at modest rates
MIN_SPAWN_RATE = 1.0  # users started per second
MAX_SPAWN_RATE = float(MAX_USERS)
MAX_STEPS = 100  # measuring windows per configuration, and entries of a users or rps schedule
MAX_ROUNDS = 50  # interleaved rounds over every configuration
MAX_WINDOWS_PER_ROUND = 10
MAX_SEED = 2**31 - 1
MAX_STEP_SECONDS = 3600.0  # one measuring window
MAX_WAIT_SECONDS = 3600.0  # warmup_seconds, settle_seconds, rollout_timeout_seconds
MAX_SECONDS_PER_CONFIG = 86_400.0
MAX_SCRAPE_INTERVAL_SECONDS = 300.0
MAX_LATENCY_SLO_MS = 60_000.0
MAX_NAME_LENGTH = 64  # the scenario's name (it goes into the run id)
MAX_TEXT_LENGTH = 2000  # description, file paths, URLs, load.path
MAX_SCENARIO_BYTES = 2**20  # a scenario file (1 MiB): SCENARIO=/proc/self/pagemap is not read for minutes
# The memory model (section `memory`) and Envoy's overload manager (`envoy.overload`).
MAX_HELD_CONNECTIONS = 25_000  # one source address to one gateway address has 28,232 ephemeral ports here
MAX_EXTRA_ROUTES = 10_000  # extra virtual hosts in Envoy's route configuration
MAX_MEMORY_POINTS = 20  # entries of memory.connections and of memory.routes
MAX_OPEN_RATE = 10_000.0  # connections opened per second
MAX_ROUTE_PROBES = 200  # routes per point created one at a time and timed (kubernetes)
MIN_REFRESH_SECONDS = 5.0
MAX_REFRESH_SECONDS = 50.0  # a held connection's request period: inside Contour's 60 s idle timeout
MIN_HOLD_SECONDS = 5.0  # Envoy refreshes its server.memory_* gauges every 5 s (stats flush)
MAX_OVERLOAD_CONNECTIONS = 10_000_000  # envoy.overload.max_connections


def _as_tuple(value: Any) -> Any:
    if value is None or isinstance(value, list | tuple):
        return value
    return (value,)


def _at_most(limit: int, what: str) -> Callable[[Any], Any]:
    """A check, before the items are parsed, that a list is not longer than `limit`."""

    def check(values: Any) -> Any:
        if isinstance(values, list | tuple) and len(values) > limit:
            raise ValueError(f"{len(values)} {what}; at most {limit}")
        return values

    return check


def _cores(value: Any) -> float:
    """A CPU quantity within MIN_CPU_CORES..MAX_CPU_CORES, in whole millicores."""
    cores = parse_cpu(value)
    if cores < MIN_CPU_CORES:
        raise ValueError(f"{short_repr(value)} is below 1m, the smallest CPU limit")
    if cores > MAX_CPU_CORES:
        raise ValueError(f"{cores:g} cores is more than {MAX_CPU_CORES:g} (MAX_CPU_CORES)")
    if abs(cores * 1000 - round(cores * 1000)) > 1e-6:
        raise ValueError(f"{short_repr(value)} is finer than 1m: use whole millicores, e.g. {format_cpu(cores)}")
    return cores


def _bytes(value: Any) -> int:
    """A memory quantity within MIN_MEMORY_BYTES..MAX_MEMORY_BYTES."""
    amount = parse_memory(value)
    if not MIN_MEMORY_BYTES <= amount <= MAX_MEMORY_BYTES:
        limits = f"{format_memory(MIN_MEMORY_BYTES)}..{format_memory(MAX_MEMORY_BYTES)}"
        raise ValueError(f"{short_repr(value)} is outside {limits}")
    return amount


def _cpu(value: Any) -> Any:
    return None if value is None else _cores(value)


def _memory(value: Any) -> Any:
    return None if value is None else _bytes(value)


def _cpus(value: Any) -> Any:
    values = _at_most(MAX_CONFIGURATIONS, "CPU limits")(_as_tuple(value))
    return values if values is None else tuple(_cores(v) for v in values)


def _memories(value: Any) -> Any:
    values = _at_most(MAX_CONFIGURATIONS, "memory limits")(_as_tuple(value))
    return values if values is None else tuple(_bytes(v) for v in values)


def _distinct(values: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{value:g} is listed twice" if isinstance(value, float) else f"{value} is listed twice")
        seen.add(value)
    return values


def _concurrency(value: Any) -> int | Literal["auto"]:
    if value == "auto":
        return "auto"
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,4}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ValueError(f"use auto or a whole number of threads from 1 to {MAX_CONCURRENCY}")
    return value


def _text_check(limit: int, *, lines: bool = False) -> Callable[[str], str]:
    """Free text: at most `limit` characters and no control characters (newlines and tabs when `lines`)."""

    def check(text: str) -> str:
        if len(text) > limit:
            raise ValueError(f"{len(text)} characters; at most {limit}")
        allowed = "\n\t" if lines else ""
        if any(not c.isprintable() and c not in allowed for c in text):
            raise ValueError("contains a control character (a line break, NUL, ...)")
        return text

    return check


def _name(text: str) -> str:
    if not text.strip():
        raise ValueError("is empty")
    return _text_check(MAX_NAME_LENGTH)(text)


_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_RE = re.compile(rf"({_HOST_LABEL}(?:\.{_HOST_LABEL})*)(?::([0-9]{{1,5}}))?")
_DNS_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_DNS_1035_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_PATH_RE = re.compile(r"/[!-~]*")  # printable ASCII, no space: percent-encode anything else
_HEADER_VALUE_RE = re.compile(r"[ -~]*")
_IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _host(text: str) -> str:
    match = _HOST_RE.fullmatch(text)
    if match is None or len(match.group(1)) > 253 or (match.group(2) and not 1 <= int(match.group(2)) <= 65535):
        raise ValueError("not a host name: letters, digits and '-' in dot-separated labels, optionally :port")
    return text


def _path(text: str) -> str:
    if len(text) > MAX_TEXT_LENGTH or not _PATH_RE.fullmatch(text) or text.startswith("//"):
        raise ValueError("not an absolute path: start with one '/', no scheme or host, no spaces or control characters")
    return text


def _header_value(text: str) -> str:
    if len(text) > 256 or not _HEADER_VALUE_RE.fullmatch(text):
        raise ValueError("not a header value: printable ASCII, at most 256 characters, no line breaks")
    return text


def _dns_label(text: str) -> str:
    if not _DNS_LABEL_RE.fullmatch(text):
        raise ValueError("not a DNS-1123 label: lowercase letters, digits and '-', at most 63, e.g. projectcontour")
    return text


def _dns_subdomain(text: str) -> str:
    if len(text) > 253 or not all(_DNS_LABEL_RE.fullmatch(label) for label in text.split(".")):
        raise ValueError("not a DNS-1123 name: lowercase letters, digits, '-' and '.', e.g. envoy")
    return text


def _service_name(text: str) -> str:
    if not _DNS_1035_RE.fullmatch(text):
        raise ValueError("not a Service name: a lowercase letter, then letters, digits and '-', at most 63")
    return text


def _url(text: str) -> str:
    _text_check(MAX_TEXT_LENGTH)(text)
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text):
        raise ValueError("not an http(s) URL, e.g. http://prometheus.example:9090")
    return text


def _image(text: str) -> str:
    if len(text) > 512 or not _IMAGE_RE.fullmatch(text):
        raise ValueError("not an image reference, e.g. locustio/locust:2.47.0")
    return text


def _identifier(text: str) -> str:
    if len(text) > 100 or not _IDENTIFIER_RE.fullmatch(text):
        raise ValueError("not a Python class name, e.g. LeanGatewayUser")
    return text


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]  # YAML's true is not 1
Float = Annotated[float, BeforeValidator(_not_bool)]
Cores = Annotated[float, BeforeValidator(_cpu)]
OptionalCores = Annotated[float | None, BeforeValidator(_cpu)]
OptionalBytes = Annotated[int | None, BeforeValidator(_memory)]
CoresList = Annotated[tuple[float, ...], BeforeValidator(_cpus), Field(min_length=1), AfterValidator(_distinct)]
BytesList = Annotated[tuple[int, ...], BeforeValidator(_memories), Field(min_length=1), AfterValidator(_distinct)]
ReplicaCounts = Annotated[
    tuple[Annotated[Int, Field(ge=1, le=MAX_REPLICAS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(_at_most(MAX_CONFIGURATIONS, "replica counts")),
    Field(min_length=1),
    AfterValidator(_distinct),
]
UserCounts = Annotated[
    tuple[Annotated[Int, Field(ge=1, le=MAX_USERS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(_at_most(MAX_STEPS, "steps")),
    Field(min_length=1),
]
Rates = Annotated[
    tuple[Annotated[Float, Field(gt=0, le=MAX_RPS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(_at_most(MAX_STEPS, "steps")),
]
ConnectionCounts = Annotated[
    tuple[Annotated[Int, Field(ge=0, le=MAX_HELD_CONNECTIONS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(_at_most(MAX_MEMORY_POINTS, "connection counts")),
    AfterValidator(_distinct),
]
RouteCounts = Annotated[
    tuple[Annotated[Int, Field(ge=0, le=MAX_EXTRA_ROUTES)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(_at_most(MAX_MEMORY_POINTS, "route counts")),
    AfterValidator(_distinct),
]
Concurrency = Annotated[int | Literal["auto"], PlainValidator(_concurrency)]
Name = Annotated[str, AfterValidator(_name)]
Text = Annotated[str, AfterValidator(_text_check(MAX_TEXT_LENGTH, lines=True))]
PathText = Annotated[str, AfterValidator(_text_check(MAX_TEXT_LENGTH))]
HostName = Annotated[str, AfterValidator(_host)]
RequestPath = Annotated[str, AfterValidator(_path)]
HeaderValue = Annotated[str, AfterValidator(_header_value)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
ServiceName = Annotated[str, AfterValidator(_service_name)]
Url = Annotated[str, AfterValidator(_url)]
Image = Annotated[str, AfterValidator(_image)]
ClassName = Annotated[str, AfterValidator(_identifier)]
ArrivalModel = Literal["poisson", "uniform", "synchronized"]


def _locustfile(path: Path) -> Path:
    _text_check(MAX_TEXT_LENGTH)(str(path))
    return path


def _arrivals(value: Any) -> Any:
    legacy = {"spread": "uniform"}  # the name scenarios before 2026-11-23 gave uniform spacing
    values = _as_tuple(value)
    return tuple(legacy.get(v, v) if isinstance(v, str) else v for v in values) if values is not None else None


ArrivalsList = Annotated[
    tuple[ArrivalModel, ...],
    BeforeValidator(_arrivals),
    Field(min_length=1, max_length=3),
    AfterValidator(_distinct),
]


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
    concurrency: Concurrency = "auto"
    guaranteed_qos: bool = True
    isolation: Literal["auto", "off"] = "auto"  # local: Envoy alone on its own CPUs when there are enough
    workload: WorkloadRef = WorkloadRef(namespace="projectcontour", name="envoy", container="envoy")
    overload: OverloadSpec | None = None

    def concurrency_for(self, cpu_cores: float) -> int:
        """Envoy worker threads for a CPU limit: `auto` is one per started core."""
        return self.concurrency if isinstance(self.concurrency, int) else max(1, math.ceil(cpu_cores))


class ContourSpec(_Model):
    """The control plane (kubernetes only): resource settings to sweep, null to leave it alone."""

    resources: Annotated[
        tuple[Resources, ...] | None, BeforeValidator(_at_most(MAX_CONFIGURATIONS, "Contour resource settings"))
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
    locustfile: Annotated[Path, AfterValidator(_locustfile)] = Path("locustfiles/gateway.py")
    user_class: ClassName | None = None
    host_header: HostName = "external.nginx"
    path: RequestPath = "/"
    workers: Int = Field(default=2, ge=1, le=MAX_WORKERS)
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
    rounds: Int = Field(default=5, ge=1, le=MAX_ROUNDS)  # interleaved rounds over every configuration
    max_rounds: Int | None = Field(default=None, ge=1, le=MAX_ROUNDS)  # more while a knee's interval is too wide
    windows_per_round: Int = Field(default=2, ge=1, le=MAX_WINDOWS_PER_ROUND)  # per configuration, after round 1
    seed: Int | None = Field(default=None, ge=0, le=MAX_SEED)  # the rounds' shuffled order; None: from the run id
    max_config_s: Float = Field(default=600.0, gt=0, le=MAX_SECONDS_PER_CONFIG, alias="max_seconds_per_config")
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
    gateway_url: Url = "http://envoy.projectcontour.svc.cluster.local"
    rollout_timeout_s: Float = Field(default=180.0, gt=0, le=MAX_WAIT_SECONDS, alias="rollout_timeout_seconds")
    keep_locust: bool = False


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
        return self

    @model_validator(mode="after")
    def _local_cpu_floor(self) -> Scenario:
        if self.platform != "local":
            return self
        limits = {
            "envoy.cpu": min(self.envoy.cpu_cores),
            "backend.cpu": self.backend.cpu_cores,
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


@dataclass(frozen=True)
class Overrides:
    """Values from the command line (or the Makefile's variables), as typed by the user."""

    envoy_cpus: str | None = None
    envoy_memory: str | None = None
    nginx_replicas: str | None = None
    workers: str | None = None
    users: str | None = None
    step_seconds: str | None = None
    platform: str | None = None
    client: str | None = None
    arrivals: str | None = None
    profiles: str | None = None
    connections: str | None = None
    routes: str | None = None

    def apply(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A copy of the raw scenario data with these overrides merged in; UsageError on bad values."""
        data = {key: dict(value) if isinstance(value, dict) else value for key, value in raw.items()}

        def section(name: str) -> dict[str, Any]:
            value = data.get(name)
            if value is None:
                value = data[name] = {}
            if not isinstance(value, dict):
                raise ScenarioError(f"{name}: expected a mapping of fields, got {type(value).__name__}")
            return value

        if self.envoy_cpus is not None:
            section("envoy")["cpu"] = list(_numbers(self.envoy_cpus, "ENVOY_CPUS"))
        if self.envoy_memory is not None:
            memories = [m.strip() for m in self.envoy_memory.split(",")]
            if len(memories) > MAX_CONFIGURATIONS:
                raise UsageError(f"ENVOY_MEMORY has more than {MAX_CONFIGURATIONS} values: sweep fewer")
            section("envoy")["memory"] = memories
        if self.nginx_replicas is not None:
            section("backend")["replicas"] = _integers(self.nginx_replicas, "NGINX_REPLICAS")
        if self.workers is not None:
            section("load")["workers"] = _integers(self.workers, "WORKERS", single=True)[0]
        if self.users is not None:
            section("load")["users"] = _integers(self.users, "USERS", max_count=MAX_STEPS)
            section("load")["mode"] = "users"
        if self.step_seconds is not None:
            section("load")["step_seconds"] = _numbers(self.step_seconds, "STEP_SECONDS", single=True)[0]
        if self.platform is not None:
            data["platform"] = self.platform
        if self.client is not None:
            section("load")["client"] = self.client
        if self.arrivals is not None:
            section("load")["arrivals"] = [m.strip() for m in self.arrivals.split(",")]
        if self.profiles is not None:
            data["profiles"] = [name.strip() for name in self.profiles.split(",")]
        if self.connections is not None:
            section("memory")["connections"] = _counts(self.connections, "CONNECTIONS")
        if self.routes is not None:
            section("memory")["routes"] = _counts(self.routes, "ROUTES")
        return data

    def origins(self) -> dict[tuple[str, ...], str]:
        """The scenario fields these overrides set, each with the variable that set it."""
        fields: dict[str, list[tuple[str, ...]]] = {
            "envoy_cpus": [("envoy", "cpu")],
            "envoy_memory": [("envoy", "memory")],
            "nginx_replicas": [("backend", "replicas")],
            "workers": [("load", "workers")],
            "users": [("load", "users"), ("load", "mode")],
            "step_seconds": [("load", "step_seconds")],
            "platform": [("platform",)],
            "client": [("load", "client")],
            "arrivals": [("load", "arrivals")],
            "profiles": [("profiles",)],
            "connections": [("memory", "connections")],
            "routes": [("memory", "routes")],
        }
        return {loc: name.upper() for name, locs in fields.items() if getattr(self, name) is not None for loc in locs}


def _numbers(text: str, what: str, *, single: bool = False, max_count: int = MAX_CONFIGURATIONS) -> tuple[float, ...]:
    try:
        values = parse_number_list(text, what=what, max_count=max_count)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if single and len(values) != 1:
        raise UsageError(f"{what}={short_repr(text)} must be a single number")
    if any(v <= 0 for v in values):
        raise UsageError(f"{what}={short_repr(text)} must be positive")
    return values


def _integers(text: str, what: str, *, single: bool = False, max_count: int = MAX_CONFIGURATIONS) -> list[int]:
    values = _numbers(text, what, single=single, max_count=max_count)
    if any(v != int(v) for v in values):
        raise UsageError(f"{what}={short_repr(text)} must be whole numbers, e.g. 1,2,3 or 1..3")
    return [int(v) for v in values]


def _counts(text: str, what: str) -> list[int]:
    """Whole numbers from 0 up (a memory point may hold no connection or add no route)."""
    try:
        values = parse_number_list(text, what=what, max_count=MAX_MEMORY_POINTS)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if any(v < 0 or v != int(v) for v in values):
        raise UsageError(f"{what}={short_repr(text)} must be whole numbers from 0, e.g. 0,1000,5000 or 0..1000:250")
    return [int(v) for v in values]


def _is_file(path: Path) -> bool:
    """Path.is_file() that answers False for a path the system refuses (too long, unreadable folder, NUL)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _shown(path: object) -> str:
    """A path as it goes into a one-line message: control characters escaped."""
    text = str(path)
    return text if text.isprintable() else repr(text)[1:-1]


def resolve_scenario_path(name_or_path: str) -> Path:
    """A scenario by path, or by name from `scenarios/` (`local` -> scenarios/local.yaml)."""
    candidates = [Path(name_or_path), SCENARIO_DIR / name_or_path, SCENARIO_DIR / f"{name_or_path}.yaml"]
    for candidate in candidates:
        if _is_file(candidate):
            return candidate
    known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))
    raise ScenarioError(f"scenario {short_repr(name_or_path, 80)} not found", f"use a file path or one of: {known}")


def load_scenario(name_or_path: str, overrides: Overrides | None = None) -> Scenario:
    """Read, override and validate a scenario; ScenarioError/UsageError name the file and the field."""
    path = resolve_scenario_path(name_or_path)
    try:
        with path.open("rb") as handle:
            content = handle.read(MAX_SCENARIO_BYTES + 1)
        if len(content) > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"scenario {_shown(path)}: larger than {MAX_SCENARIO_BYTES // 2**10} KiB")
        raw = yaml.safe_load(content.decode())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise ScenarioError(f"scenario {_shown(path)}:{where} is not valid YAML ({_shown(problem)})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(f"scenario {_shown(path)} cannot be read ({type(error).__name__})") from None
    except (ValueError, RecursionError) as error:  # an int too long to convert, nesting too deep
        raise ScenarioError(f"scenario {_shown(path)} cannot be loaded ({_shown(str(error))[:80]})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"scenario {_shown(path)}: expected a mapping of fields at the top level")
    raw.setdefault("name", path.stem)
    return parse_scenario(raw, overrides, source=_shown(path))


def parse_scenario(raw: dict[str, Any], overrides: Overrides | None = None, *, source: str = "scenario") -> Scenario:
    """Validate raw scenario data (after overrides) into a Scenario, checking the locustfile exists."""
    overrides = overrides or Overrides()
    try:
        data = overrides.apply(raw)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{source}: {_describe(error, overrides.origins())}") from None
    locustfile = locate_locustfile(scenario.load.locustfile)
    if locustfile is None:
        raise ScenarioError(
            f"{source}: load.locustfile {short_repr(str(scenario.load.locustfile), 80)} does not exist",
            "point it at a file under locustfiles/ (default locustfiles/gateway.py)",
        )
    return scenario.model_copy(update={"load": scenario.load.model_copy(update={"locustfile": locustfile})})


def locate_locustfile(path: Path) -> Path | None:
    """The locustfile as an absolute path: as given, or relative to the project root."""
    for candidate in (path, PROJECT_ROOT / path):
        if _is_file(candidate):
            return candidate.resolve()
    return None


MAX_PROBLEMS_SHOWN = 3


def _describe(error: ValidationError, origins: dict[tuple[str, ...], str] | None = None) -> str:
    """The problems of a validation in one line: unknown keys first (with the closest allowed one), then the rest."""
    problems = sorted(error.errors(), key=lambda problem: problem["type"] != "extra_forbidden")
    first, others = problems[0], problems[1:]
    line = _problem(first, origins or {}, full=True)
    shown = [_problem(problem, origins or {}, full=False) for problem in others[: MAX_PROBLEMS_SHOWN - 1]]
    hidden = len(others) - len(shown)
    if hidden:
        shown.append(f"{hidden} more")
    return line + (f" (also {'; '.join(shown)})" if shown else "")


def _problem(problem: Any, origins: dict[tuple[str, ...], str], *, full: bool) -> str:
    loc = tuple(problem["loc"])
    field = _field(loc)
    origin = next((name for prefix, name in origins.items() if loc[: len(prefix)] == prefix), None)
    if origin:
        field += f" ({origin})"
    if problem["type"] == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1])
        match = _closest(loc[-1], allowed)
        if match:
            return f"{field}: unknown field; did you mean {match}?"
        if full and allowed:
            return f"{field}: unknown field (allowed here: {', '.join(allowed)})"
        return f"{field}: unknown field"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] in ("model_type", "model_attributes_type", "dict_type"):
        message = "expected a mapping of fields"  # not "a valid dictionary or instance of WorkloadRef"
    if not full:
        message = message[:1].lower() + message[1:]
    elif problem["type"] != "value_error" and "input" in problem and not isinstance(problem["input"], dict | list):
        message += f" (got {short_repr(problem['input'])})"
    return f"{field}: {_shown(message)}" if field else _shown(message)


def _field(loc: tuple[Any, ...]) -> str:
    """A field's path as the YAML spells it: `load.step_seconds`, `envoy.cpu[1]`."""
    text = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            name = str(part)
            name = name if name.isprintable() and len(name) <= 40 else short_repr(name)
            text += f".{name}" if text else name
    return text


def _closest(key: Any, allowed: list[str]) -> str | None:
    """The allowed key closest to a misspelt one (case and '-' vs '_' aside), or None."""
    if not isinstance(key, str) or not allowed:
        return None
    folded = {name.lower(): name for name in allowed}
    matches = difflib.get_close_matches(key.lower().replace("-", "_"), list(folded), n=1, cutoff=0.6)
    return folded[matches[0]] if matches else None


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of models (contour.resources[0])
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        found = _model_in(getattr(field, "annotation", None))
        if found is None:
            return []
        model = found
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class in an annotation such as `Resources | None` or `tuple[Resources, ...] | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, tuple, typing.Annotated):
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None


def first_difference(before: Any, after: Any, path: str = "") -> str | None:
    """The first field (dotted path) whose value differs between two dumped scenarios, else None."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            found = first_difference(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    return None if before == after else (path or "(the scenario)")

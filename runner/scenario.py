"""Scenarios: a YAML file plus command-line overrides, validated once into frozen typed objects.

Units live in attribute names (`cpu_cores`, `memory_bytes`, `step_s`); the YAML keeps the short
Kubernetes-style keys (`cpu: 500m`, `memory: 1Gi`, `step_seconds: 10`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from runner.errors import ScenarioError, UsageError
from runner.quantities import parse_cpu, parse_memory, parse_number_list

DEFAULT_THRESHOLD = 0.90
PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCENARIO_DIR = PROJECT_ROOT / "scenarios"
DEFAULT_SCENARIO = "local"


def _as_tuple(value: Any) -> Any:
    if value is None or isinstance(value, list | tuple):
        return value
    return (value,)


def _cpu(value: Any) -> Any:
    return None if value is None else parse_cpu(value)


def _memory(value: Any) -> Any:
    return None if value is None else parse_memory(value)


def _cpus(value: Any) -> Any:
    return tuple(parse_cpu(v) for v in _as_tuple(value))


def _memories(value: Any) -> Any:
    return tuple(parse_memory(v) for v in _as_tuple(value))


Cores = Annotated[float, BeforeValidator(_cpu)]
OptionalCores = Annotated[float | None, BeforeValidator(_cpu)]
OptionalBytes = Annotated[int | None, BeforeValidator(_memory)]
CoresList = Annotated[tuple[float, ...], BeforeValidator(_cpus), Field(min_length=1)]
BytesList = Annotated[tuple[int, ...], BeforeValidator(_memories), Field(min_length=1)]
PositiveInts = Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeValidator(_as_tuple), Field(min_length=1)]
PositiveFloats = Annotated[tuple[Annotated[float, Field(gt=0)], ...], BeforeValidator(_as_tuple)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class WorkloadRef(_Model):
    """A Kubernetes workload and the container in it that the sweep patches."""

    namespace: str
    name: str
    container: str
    kind: Literal["auto", "DaemonSet", "Deployment"] = "auto"


class ServiceRef(_Model):
    """A Kubernetes Service and port, reached through the API server's service proxy."""

    namespace: str
    name: str
    port: int = Field(ge=1, le=65535)


class Resources(_Model):
    """CPU and memory of one container (limits; requests equal them for Guaranteed QoS)."""

    cpu_cores: OptionalCores = Field(default=None, alias="cpu")
    memory_bytes: OptionalBytes = Field(default=None, alias="memory")


class EnvoySpec(_Model):
    """The gateway's data plane: the limits to sweep and where it runs."""

    cpu_cores: CoresList = Field(alias="cpu")
    memory_bytes: BytesList = Field(default=(512 * 2**20,), alias="memory")
    concurrency: int | Literal["auto"] = "auto"
    guaranteed_qos: bool = True
    workload: WorkloadRef = WorkloadRef(namespace="projectcontour", name="envoy", container="envoy")

    def concurrency_for(self, cpu_cores: float) -> int:
        """Envoy worker threads for a CPU limit: `auto` is one per started core."""
        return self.concurrency if isinstance(self.concurrency, int) else max(1, math.ceil(cpu_cores))


class ContourSpec(_Model):
    """The control plane (kubernetes only): resource settings to sweep, null to leave it alone."""

    resources: tuple[Resources, ...] | None = None
    workload: WorkloadRef = WorkloadRef(namespace="projectcontour", name="contour", container="contour")


class BackendSpec(_Model):
    """The nginx backend behind the gateway."""

    replicas: PositiveInts = (1,)
    cpu_cores: OptionalCores = Field(default=None, alias="cpu")
    memory_bytes: OptionalBytes = Field(default=None, alias="memory")
    worker_processes: int = Field(default=1, ge=1)
    response_status: int = Field(default=200, ge=200, le=599)
    workload: WorkloadRef = WorkloadRef(namespace="gateway-loadtest", name="nginx", container="nginx")


class LoadSpec(_Model):
    """How Locust drives the gateway and how the load is stepped."""

    client: Literal["fasthttp", "lean"] = "lean"
    locustfile: Path = Path("locustfiles/gateway.py")
    user_class: str | None = None
    host_header: str = "external.nginx"
    path: str = "/"
    workers: int = Field(default=2, ge=1)
    mode: Literal["users", "rps"] = "rps"
    arrivals: Literal["synchronized", "spread"] = "synchronized"
    accept_encoding: str = "gzip, deflate, br"
    search: Literal["adaptive", "ramp", "fixed"] = "adaptive"
    users: PositiveInts = (4, 8, 12, 16)
    rps: PositiveFloats | None = None
    start_users: int = Field(default=1, ge=1)
    start_rps: float = Field(default=100.0, gt=0)
    max_rps_per_user: float = Field(default=20.0, gt=0)
    spawn_rate: float = Field(default=100.0, gt=0)
    step_s: float = Field(default=10.0, ge=1, alias="step_seconds")
    warmup_s: float = Field(default=5.0, ge=0, alias="warmup_seconds")
    settle_s: float = Field(default=3.0, ge=0, alias="settle_seconds")
    max_steps: int = Field(default=12, ge=2)
    max_config_s: float = Field(default=600.0, gt=0, alias="max_seconds_per_config")

    @property
    def locust_user_class(self) -> str:
        """The Locust user class to run: explicit, or the one that implements `client`."""
        return self.user_class or {"fasthttp": "FastGatewayUser", "lean": "LeanGatewayUser"}[self.client]

    @model_validator(mode="after")
    def _ramp_needs_schedule(self) -> LoadSpec:
        if self.search in ("ramp", "fixed") and self.mode == "rps" and not self.rps:
            raise ValueError(f"search: {self.search} with mode: rps needs a list of target rates under load.rps")
        return self


class BaselineSpec(_Model):
    """The backend measured directly (no gateway) and through it, with the same closed-loop load."""

    enabled: bool = False
    users: int = Field(default=20, ge=1)
    envoy_cpu_cores: OptionalCores = Field(default=None, alias="envoy_cpu")  # None: the sweep's largest

    def envoy_cpu_for(self, cpus: tuple[float, ...]) -> float:
        return self.envoy_cpu_cores if self.envoy_cpu_cores is not None else max(cpus)


class PrometheusSpec(_Model):
    """Where metrics come from: a URL, or (null) the platform's own Prometheus."""

    url: str | None = None
    scrape_interval_s: float = Field(default=1.0, gt=0, alias="scrape_interval_seconds")
    service: ServiceRef = ServiceRef(namespace="monitoring", name="prometheus", port=9090)


class KubernetesSpec(_Model):
    """Cluster access and the Locust objects the kubernetes platform creates.

    Unset image, pull policy and worker resources come from the optional ConfigMap
    `gateway-sizer-defaults` in `namespace` (the one-machine cluster installs one), else from
    locustio/locust:2.47.0, IfNotPresent and 1 CPU / 512Mi per worker.
    """

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "gateway-loadtest"
    locust_image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    worker_resources: Resources | None = None
    gateway_url: str = "http://envoy.projectcontour.svc.cluster.local"
    rollout_timeout_s: float = Field(default=180.0, gt=0, alias="rollout_timeout_seconds")
    keep_locust: bool = False


class Scenario(_Model):
    """One sweep: what to vary, how to load it, where to run it."""

    name: str
    description: str = ""
    platform: Literal["local", "kubernetes"] = "local"
    envoy: EnvoySpec
    contour: ContourSpec = ContourSpec()
    backend: BackendSpec = BackendSpec()
    load: LoadSpec = LoadSpec()
    threshold: float = Field(default=DEFAULT_THRESHOLD, gt=0, le=1)
    baseline: BaselineSpec = BaselineSpec()
    prometheus: PrometheusSpec = PrometheusSpec()
    kubernetes: KubernetesSpec = KubernetesSpec()

    def dump(self) -> dict[str, Any]:
        """The resolved scenario as YAML-ready data, with the file's own keys."""
        return self.model_dump(mode="json", by_alias=True)


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

    def apply(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A copy of the raw scenario data with these overrides merged in; UsageError on bad values."""
        data = {key: dict(value) if isinstance(value, dict) else value for key, value in raw.items()}
        for section in ("envoy", "backend", "load"):
            data.setdefault(section, {})
        if self.envoy_cpus is not None:
            data["envoy"]["cpu"] = list(_numbers(self.envoy_cpus, "ENVOY_CPUS"))
        if self.envoy_memory is not None:
            data["envoy"]["memory"] = [m.strip() for m in self.envoy_memory.split(",")]
        if self.nginx_replicas is not None:
            data["backend"]["replicas"] = _integers(self.nginx_replicas, "NGINX_REPLICAS")
        if self.workers is not None:
            data["load"]["workers"] = _integers(self.workers, "WORKERS", single=True)[0]
        if self.users is not None:
            data["load"]["users"] = _integers(self.users, "USERS")
            data["load"]["mode"] = "users"
        if self.step_seconds is not None:
            data["load"]["step_seconds"] = _numbers(self.step_seconds, "STEP_SECONDS", single=True)[0]
        if self.platform is not None:
            data["platform"] = self.platform
        if self.client is not None:
            data["load"]["client"] = self.client
        return data


def _numbers(text: str, what: str, *, single: bool = False) -> tuple[float, ...]:
    try:
        values = parse_number_list(text, what=what)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if single and len(values) != 1:
        raise UsageError(f"{what}={text!r} must be a single number")
    if any(v <= 0 for v in values):
        raise UsageError(f"{what}={text!r} must be positive")
    return values


def _integers(text: str, what: str, *, single: bool = False) -> list[int]:
    values = _numbers(text, what, single=single)
    if any(v != int(v) for v in values):
        raise UsageError(f"{what}={text!r} must be whole numbers, e.g. 1,2,3 or 1..3")
    return [int(v) for v in values]


def resolve_scenario_path(name_or_path: str) -> Path:
    """A scenario by path, or by name from `scenarios/` (`local` -> scenarios/local.yaml)."""
    candidates = [Path(name_or_path), SCENARIO_DIR / name_or_path, SCENARIO_DIR / f"{name_or_path}.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))
    raise ScenarioError(f"scenario {name_or_path!r} not found", f"use a file path or one of: {known}")


def load_scenario(name_or_path: str, overrides: Overrides | None = None) -> Scenario:
    """Read, override and validate a scenario; ScenarioError/UsageError name the file and the field."""
    path = resolve_scenario_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{path}:{where} is not valid YAML ({getattr(error, 'problem', error)})") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a mapping of fields at the top level")
    raw.setdefault("name", path.stem)
    return parse_scenario(raw, overrides, source=str(path))


def parse_scenario(raw: dict[str, Any], overrides: Overrides | None = None, *, source: str = "scenario") -> Scenario:
    """Validate raw scenario data (after overrides) into a Scenario, checking the locustfile exists."""
    data = (overrides or Overrides()).apply(raw)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{source}: {_describe(error)}") from None
    locustfile = locate_locustfile(scenario.load.locustfile)
    if locustfile is None:
        raise ScenarioError(
            f"{source}: load.locustfile {str(scenario.load.locustfile)!r} does not exist",
            "point it at a file under locustfiles/ (default locustfiles/gateway.py)",
        )
    return scenario.model_copy(update={"load": scenario.load.model_copy(update={"locustfile": locustfile})})


def locate_locustfile(path: Path) -> Path | None:
    """The locustfile as an absolute path: as given, or relative to the project root."""
    for candidate in (path, PROJECT_ROOT / path):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        message = f"{field}: unknown field"
        allowed = _allowed_fields(first["loc"][:-1])
        if allowed:
            message += f" (allowed here: {', '.join(allowed)})"
    else:
        message = f"{field}: {first['msg']}"
        if "input" in first and not isinstance(first["input"], dict | list):
            message += f" (got {first['input']!r})"
    more = error.error_count() - 1
    return message + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc:
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return sorted(f.alias or n for n, f in model.model_fields.items())

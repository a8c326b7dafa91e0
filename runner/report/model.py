"""The report model: everything a renderer shows, computed once from a run's summary. Pure.

Renderers (markdown, html, plots) only lay this out; they compute nothing of their own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from runner.model import ConfigResult, RunSummary, Step
from runner.profiles import PLAIN
from runner.report import formatting as fmt
from runner.report.analysis import Conclusion, conclusions, step_analysis
from runner.report.memory_report import MemorySection, build_memory_section
from runner.report.profiles import ProfileComparison, compare_profiles
from runner.report.sizing import (
    DEFAULT_HEADROOM,
    Fit,
    KneePoint,
    Recommendation,
    example_targets,
    fit_knees,
    knee_points,
    recommend,
    sizing_profile,
    valid_knee,
)
from runner.scenario import LoadSpec, Scenario

__all__ = ["Baseline", "ConfigSection", "EnvRow", "KneeRow", "Report", "StepRow", "build_report"]

_GIB = 2**30


@dataclass(frozen=True)
class EnvRow:
    """One line of the environment table, as the reference report writes it: object, role, description."""

    name: str
    role: str
    description: str


@dataclass(frozen=True)
class StepRow:
    """A step as the report's tables show it: the measured step and what it lacks, the analysis sentence
    and whether it reached the threshold."""

    step: Step
    analysis: str
    at_limit: bool

    @property
    def number(self) -> int:
        return self.step.index + 1

    @property
    def cpu_range(self) -> str:
        return fmt.percent_range(self.step.cpu_utilization_min, self.step.cpu_utilization_max)


@dataclass(frozen=True)
class ConfigSection:
    """One configuration's table of steps, ordered by offered load, under a sentence that sums it up."""

    label: str
    knee: KneeRow
    rows: tuple[StepRow, ...]
    broken_by: str | None = None

    @property
    def anchor(self) -> str:
        return self.knee.anchor

    @property
    def knee_rps(self) -> float | None:
        return self.knee.knee_rps

    @property
    def knee_users(self) -> float | None:
        return self.knee.knee_users

    @property
    def headline(self) -> str:
        """ "Status saturated; knee 1,190 RPS (95% CI 1,150-1,230), 4,760 RPS per core, 189 µs of Envoy CPU
        per request; capacity 1,280 RPS (1,330 broke: ...)." """
        k = self.knee
        text = f"Status {k.status}"
        if k.knee_rps is not None:
            ci = f" (95% CI {k.interval})" if k.knee_low is not None else " (no interval: too few windows)"
            text += (
                f"; knee {fmt.rps(k.knee_rps)} RPS{ci}, {fmt.rps(k.rps_per_core)} RPS per core, "
                f"{k.cpu_per_request_us:,.0f} \u00b5s of Envoy CPU per request"
            )
        if k.capacity_rps is not None:
            text += f"; capacity {fmt.rps(k.capacity_rps)} RPS"
            if k.capacity_broken_at is not None:
                text += f" ({fmt.rps(k.capacity_broken_at)} broke: {self.broken_by})"
            else:
                text += " (no rate measured broke it)"
        if k.reason:
            text += f": {k.reason}"
        return text + "."


@dataclass(frozen=True)
class KneeRow:
    """One configuration in the knee table: its resources, knee with interval, capacity and verdict."""

    anchor: str
    cpu_cores: float
    memory: str
    concurrency: int
    replicas: int
    contour: str
    arrivals: str
    knee_rps: float | None
    knee_users: float | None
    status: str
    reason: str | None
    knee_low: float | None = None
    knee_high: float | None = None
    capacity_rps: float | None = None
    capacity_broken_at: float | None = None
    cpu_per_request_us: float | None = None  # Envoy CPU per request at the knee
    plateau: bool = False  # utilization flat near the threshold: the knee is not sharp
    search: str | None = None
    profile: str = "plain"  # the traffic profile (runner.profiles)

    @property
    def rps_per_core(self) -> float | None:
        return self.knee_rps / self.cpu_cores if self.knee_rps is not None else None

    @property
    def interval(self) -> str:
        """ "1,150-1,230" or "-" """
        if self.knee_low is None or self.knee_high is None:
            return "-"
        return f"{fmt.rps(self.knee_low)}-{fmt.rps(self.knee_high)}"

    @property
    def half_width(self) -> float | None:
        if self.knee_rps is None or self.knee_low is None or self.knee_high is None:
            return None
        return max(self.knee_rps - self.knee_low, self.knee_high - self.knee_rps) / self.knee_rps

    @property
    def capacity(self) -> str:
        """ "1,280 (<1,330)": served up to the first figure, broken at the second; "-" when not measured."""
        if self.capacity_rps is None:
            return "-"
        above = f" (<{fmt.rps(self.capacity_broken_at)})" if self.capacity_broken_at else " (not broken)"
        return fmt.rps(self.capacity_rps) + above

    @property
    def headroom(self) -> float | None:
        """How far capacity sits above the knee (0.12 = 12%)."""
        if self.capacity_rps is None or self.knee_rps is None:
            return None
        return self.capacity_rps / self.knee_rps - 1


@dataclass(frozen=True)
class Baseline:
    """The backend measured without the gateway and through it, and the share of direct throughput kept."""

    users: int
    envoy_cpu: float
    direct_rps: float
    gateway_rps: float
    direct_p95_ms: float | None
    gateway_p95_ms: float | None
    gateway_cpu: float | None

    @property
    def ratio(self) -> float:
        return self.gateway_rps / self.direct_rps

    @property
    def overhead(self) -> float:
        """The share of direct throughput lost through the gateway."""
        return 1 - self.ratio


@dataclass(frozen=True)
class FixedLoad:
    """Envoy's CPU at one fixed offered load (search: fixed), per 1,000 RPS served."""

    label: str
    offered_rps: float
    rps: float
    envoy_cores: float
    utilization: float

    @property
    def cores_per_1k_rps(self) -> float:
        return self.envoy_cores / self.rps * 1000 if self.rps > 0 else 0.0


@dataclass(frozen=True)
class Report:
    run_id: str
    title: str
    scenario: str
    platform: str
    duration: str
    status: str
    reason: str | None
    threshold: float
    headroom: float
    run_facts: tuple[tuple[str, str], ...]
    environment: tuple[EnvRow, ...]
    knees: tuple[KneeRow, ...]
    points: tuple[KneePoint, ...]
    fit: Fit | None
    no_fit_reason: str | None
    examples: tuple[Recommendation, ...]
    conclusions: tuple[Conclusion, ...]
    configs: tuple[ConfigSection, ...]
    reproduce: tuple[str, ...]
    baseline: Baseline | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    fixed_loads: tuple[FixedLoad, ...] = ()
    profiles: ProfileComparison | None = None
    sizing_profile: str = PLAIN
    memory: MemorySection | None = None  # the memory model (runner.report.memory_report)

    @property
    def several_arrivals(self) -> bool:
        """Whether the run measured more than one arrival model (the knee table then shows the column)."""
        return len({k.arrivals for k in self.knees}) > 1

    @property
    def several_profiles(self) -> bool:
        """Whether the run measured more than one traffic profile (the knee table then shows the column)."""
        return self.profiles is not None

    @property
    def has_contour(self) -> bool:
        """Whether any configuration set Contour's resources (the knee table leaves the column out otherwise)."""
        return any(k.contour != "-" for k in self.knees)

    @property
    def sizing_rule(self) -> str | None:
        """ "Envoy cores = (target RPS x 1.3 + 756) / 8,534, rounded up to 100m" """
        if self.fit is None or self.fit.slope <= 0:
            return None
        sign = "-" if self.fit.intercept >= 0 else "+"
        return (
            f"Envoy cores = (target RPS x {1 + self.headroom:g} {sign} {abs(self.fit.intercept):,.0f}) / "
            f"{self.fit.slope:,.0f}, rounded up to 100m"
        )


def _anchor(config: ConfigResult) -> str:
    return "config-" + re.sub(r"[^a-z0-9]+", "-", config.key.lower()).strip("-")


def _section(config: ConfigResult, threshold: float) -> ConfigSection:
    steps = sorted(config.steps, key=lambda s: (s.offered, s.index))
    rows = tuple(StepRow(s, step_analysis(s, steps, threshold), s.cpu_utilization_mean >= threshold) for s in steps)
    broken_by = config.capacity.broken_by if config.capacity else None
    return ConfigSection(config.label, _knee_row(config, threshold), rows, broken_by)


def _knee_row(config: ConfigResult, threshold: float) -> KneeRow:
    contour = config.contour
    knee = valid_knee(config)
    capacity = config.capacity if config.status != "failed" else None
    return KneeRow(
        anchor=_anchor(config),
        cpu_cores=config.envoy.cpu_cores,
        memory=config.envoy.memory,
        concurrency=config.envoy.concurrency,
        replicas=config.backend.replicas,
        contour=f"{fmt.cpu(contour.cpu_cores)} CPU / {contour.memory or '-'}" if contour and contour.cpu_cores else "-",
        arrivals=config.arrivals,
        knee_rps=knee.rps if knee else None,
        knee_users=knee.users if knee else None,
        status=config.status,
        reason=config.reason,
        knee_low=knee.low if knee else None,
        knee_high=knee.high if knee else None,
        capacity_rps=capacity.rps if capacity else None,
        capacity_broken_at=capacity.broken_at if capacity else None,
        cpu_per_request_us=threshold * config.envoy.cpu_cores / knee.rps * 1e6 if knee else None,
        plateau=bool(knee and knee.plateau),
        search=config.search,
        profile=config.profile.name,
    )


def _duration(start: str, end: str | None) -> str:
    if not end:
        return "-"
    seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    return f"{seconds / 60:.1f} min"


def _run_facts(summary: RunSummary, scenario: Scenario | None) -> tuple[tuple[str, str], ...]:
    overrides = summary.environment.overrides
    status = summary.status + (f": {summary.reason}" if summary.reason else "")
    description = f": {scenario.description}" if scenario and scenario.description else ""
    return (
        ("Run", summary.run_id),
        ("Platform", summary.platform),
        ("Scenario", summary.scenario + description),
        ("Overrides", ", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"),
        ("Knee threshold", f"{summary.threshold:.0%} of Envoy's CPU limit"),
        ("Started", summary.started_at),
        ("Duration", _duration(summary.started_at, summary.finished_at)),
        ("Status", status),
    )


def _joined(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values) or "-"


def _locust_facts(load: LoadSpec) -> str:
    mode = "open-loop target RPS" if load.mode == "rps" else "closed-loop users"
    arrivals = f", {'/'.join(load.arrivals)} arrivals" if load.mode == "rps" else ""
    return (
        f"1 master + {load.workers} worker(s); {load.client} client; {mode}{arrivals}, {load.search} search; "
        f"{load.step_s:g} s windows"
    )


def _host(summary: RunSummary) -> str:
    env, machine = summary.environment, summary.environment.machine
    parts = (
        machine.cpu_model,
        f"{machine.cpu_cores} cores" if machine.cpu_cores else None,
        f"{machine.memory_bytes / _GIB:.1f} GiB" if machine.memory_bytes else None,
        f"Linux {machine.kernel}" if machine.kernel else None,
        f"cgroup v{env.cgroup_version}" if env.cgroup_version else None,
        f"Python {machine.python}" if machine.python else None,
    )
    return ", ".join(p for p in parts if p) or "not recorded"


def _environment(summary: RunSummary, scenario: Scenario | None) -> tuple[EnvRow, ...]:
    versions = dict(summary.environment.versions)

    def version(name: str) -> str:
        return versions.pop(name, None) or "version not recorded"

    configs = summary.configs
    specs = [(c.envoy.cpu_cores, c.envoy.memory, c.envoy.concurrency) for c in configs]
    if summary.memory is not None:  # the memory experiment's Envoy
        specs.append((summary.memory.envoy_cpu_cores, summary.memory.envoy_memory, summary.memory.concurrency))
    envoy = (
        f"{version('envoy')}; CPU limits {_joined(fmt.cpu(c) for c in sorted({s[0] for s in specs}))}; "
        f"memory {_joined(sorted({s[1] for s in specs}))}; "
        f"concurrency {_joined(sorted({s[2] for s in specs}))}"
    )
    contour = versions.pop("contour", None) or (
        "not used: the local platform programs Envoy as Contour would" if summary.platform == "local" else "-"
    )
    replicas = {c.backend.replicas for c in configs}
    if summary.memory is not None and scenario is not None:  # the memory experiment scales to the largest count
        replicas.add(scenario.backend.max_replicas)
    nginx = version("nginx") + (f"; {_joined(sorted(replicas))} replica(s)" if replicas else "")
    locust, prometheus = version("locust"), version("prometheus")
    if scenario is not None:
        nginx += f", {scenario.backend.worker_processes} worker process(es) each"
        locust += f"; {_locust_facts(scenario.load)}"
        prometheus += f"; {scenario.prometheus.scrape_interval_s:g} s scrape interval"
    rows = [
        EnvRow("Envoy", "Gateway data plane: the system under test", envoy),
        EnvRow("Contour", "Gateway control plane", contour),
        EnvRow("nginx", "Backend service behind the gateway", nginx),
        EnvRow("Locust", "Load generator", locust),
        EnvRow("Prometheus", "Metrics: Envoy CPU, memory and request rate", prometheus),
        EnvRow("Host", "Machine that ran the sweep", _host(summary)),
    ]
    isolation = summary.environment.isolation
    if isolation is not None:
        policy = f"kubelet CPU manager policy: {isolation.cpu_manager_policy}; " if isolation.cpu_manager_policy else ""
        rows.append(EnvRow("Isolation", "Where Envoy ran", policy + (isolation.note or "not recorded")))
    for node in summary.environment.nodes or ():
        facts = (node.cpu_model or "CPU model not labelled (Node Feature Discovery)", f"{node.cpu} CPUs", node.kernel)
        rows.append(EnvRow(f"Node {node.name}", "Kubernetes node", ", ".join(f for f in facts if f)))
    rows += [EnvRow(name, "Component", str(value)) for name, value in versions.items()]
    if summary.environment.machine.gateway_sizer:
        rows.append(EnvRow("gateway-sizer", "This tool", summary.environment.machine.gateway_sizer))
    return tuple(rows)


def _reproduce(summary: RunSummary) -> tuple[str, ...]:
    overrides = summary.environment.overrides
    make = " ".join(
        [f"SCENARIO={shlex.quote(summary.scenario)}"] + [f"{k.upper()}={shlex.quote(v)}" for k, v in overrides.items()]
    )
    cli = " ".join(
        [f"--scenario {shlex.quote(summary.scenario)}"]
        + [f"--{k.replace('_', '-')} {shlex.quote(v)}" for k, v in overrides.items()]
    )
    return (
        f"make sweep {make}",
        f"gateway-sizer sweep {cli}",
        f"make report RUN=results/{summary.run_id}",
    )


def _baseline(summary: RunSummary) -> Baseline | None:
    """The backend measured directly and through Envoy, when the run measured it (scenario `baseline`)."""
    measured = summary.baseline
    if measured is None or not measured.direct.rps:
        return None
    return Baseline(
        users=measured.users,
        envoy_cpu=measured.envoy_cpu_cores,
        direct_rps=measured.direct.rps,
        gateway_rps=measured.gateway.rps,
        direct_p95_ms=measured.direct.p95_ms,
        gateway_p95_ms=measured.gateway.p95_ms,
        gateway_cpu=measured.gateway.cpu_utilization_mean,
    )


def _fixed_loads(summary: RunSummary, scenario: Scenario | None) -> tuple[FixedLoad, ...]:
    """With `search: fixed`, every configuration's CPU at each offered rate (the figures Envoy needs per
    1,000 RPS at loads below its limit)."""
    if scenario is None or scenario.load.search != "fixed" or scenario.load.mode != "rps":
        return ()
    return tuple(
        FixedLoad(c.label, s.offered, s.rps, s.envoy_cpu_cores, s.cpu_utilization_mean)
        for c in summary.configs
        for s in sorted(c.steps, key=lambda s: s.offered)
        if s.rps > 0
    )


def _no_fit_reason(points: Sequence[KneePoint], *, memory_only: bool = False) -> str:
    if memory_only:
        return "this run measured the memory model only (memory.only), no knee: see Memory below"
    if not points:
        return "no configuration has a valid knee, so there is no sizing rule: see each configuration's reason"
    limits = ", ".join(sorted({fmt.cpu(p.cpu_cores) for p in points}))
    return f"valid knees at one Envoy CPU limit only ({limits}): sweep two or more limits for a sizing rule"


def build_report(summary: RunSummary, scenario: Scenario | None = None, headroom: float = DEFAULT_HEADROOM) -> Report:
    """The report for one run; `scenario` is the run's resolved scenario, when it has one that still loads."""
    points = knee_points(summary)
    fit = fit_knees(points)
    examples = tuple(recommend(fit, t, headroom) for t in example_targets(fit)) if fit and fit.slope > 0 else ()
    notes = []
    if summary.status != "complete":
        notes.append(
            f"The run is {summary.status}"
            + (f" ({summary.reason})" if summary.reason else "")
            + ": this report covers the configurations that finished."
        )
    return Report(
        run_id=summary.run_id,
        title="Envoy gateway sizing report",
        scenario=summary.scenario,
        platform=summary.platform,
        duration=_duration(summary.started_at, summary.finished_at),
        status=summary.status,
        reason=summary.reason,
        threshold=summary.threshold,
        headroom=headroom,
        run_facts=_run_facts(summary, scenario),
        environment=_environment(summary, scenario),
        knees=tuple(_knee_row(c, summary.threshold) for c in summary.configs),
        points=tuple(points),
        fit=fit,
        no_fit_reason=None if fit else _no_fit_reason(points, memory_only=bool(summary.memory and not summary.configs)),
        examples=examples,
        conclusions=tuple(conclusions(summary, fit, points)),
        configs=tuple(_section(c, summary.threshold) for c in summary.configs if c.steps),
        reproduce=_reproduce(summary),
        baseline=_baseline(summary),
        notes=tuple(notes),
        fixed_loads=_fixed_loads(summary, scenario),
        profiles=compare_profiles(summary, headroom),
        sizing_profile=sizing_profile(summary),
        memory=build_memory_section(summary.memory, headroom),
    )

"""The report model: everything a renderer shows, computed once from a run's summary. Pure.

Renderers (markdown, html, plots) only lay this out; they compute nothing of their own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runner.console import percent_range
from runner.report import formatting as fmt
from runner.report.analysis import Conclusion, conclusions, offered, step_analysis
from runner.report.sizing import (
    DEFAULT_HEADROOM,
    Fit,
    KneePoint,
    Recommendation,
    example_targets,
    fit_knees,
    knee_points,
    recommend,
    valid_knee,
)
from runner.results import ConfigResult, RunSummary

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
    number: int
    users: int
    target_rps: float | None
    rps: float
    envoy_rps: float
    cpu_min: float
    cpu_mean: float
    cpu_max: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    fail_ratio: float
    analysis: str
    at_limit: bool

    @property
    def cpu_range(self) -> str:
        return percent_range(self.cpu_min, self.cpu_max)


@dataclass(frozen=True)
class ConfigSection:
    """One configuration's table of steps, ordered by offered load."""

    anchor: str
    label: str
    status: str
    reason: str | None
    knee_rps: float | None
    knee_users: float | None
    rows: tuple[StepRow, ...]
    cpu_cores: float


@dataclass(frozen=True)
class KneeRow:
    anchor: str
    cpu_cores: float
    memory: str
    concurrency: int
    replicas: int
    contour: str
    knee_rps: float | None
    knee_users: float | None
    status: str
    reason: str | None

    @property
    def rps_per_core(self) -> float | None:
        return self.knee_rps / self.cpu_cores if self.knee_rps is not None else None


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


def _step_row(step: dict[str, Any], steps: Sequence[dict[str, Any]], threshold: float) -> StepRow:
    return StepRow(
        number=step["index"] + 1,
        users=step["users"],
        target_rps=step.get("target_rps"),
        rps=step["rps"],
        envoy_rps=step.get("envoy_rps") or 0.0,
        cpu_min=step["cpu_utilization_min"],
        cpu_mean=step["cpu_utilization_mean"],
        cpu_max=step["cpu_utilization_max"],
        p50_ms=step.get("p50_ms"),
        p95_ms=step.get("p95_ms"),
        p99_ms=step.get("p99_ms"),
        fail_ratio=step.get("fail_ratio") or 0.0,
        analysis=step_analysis(step, steps, threshold),
        at_limit=step["cpu_utilization_mean"] >= threshold,
    )


def _section(config: ConfigResult, threshold: float) -> ConfigSection:
    steps = sorted(config.steps, key=lambda s: (offered(s), s["index"]))
    rows = tuple(_step_row(s, steps, threshold) for s in steps)
    knee = valid_knee(config)
    return ConfigSection(
        anchor=_anchor(config),
        label=config.label,
        status=config.status,
        reason=config.reason,
        knee_rps=knee.rps if knee else None,
        knee_users=knee.users if knee else None,
        rows=rows,
        cpu_cores=config.envoy.cpu,
    )


def _knee_row(config: ConfigResult) -> KneeRow:
    contour = config.contour
    knee = valid_knee(config)
    return KneeRow(
        anchor=_anchor(config),
        cpu_cores=config.envoy.cpu,
        memory=config.envoy.memory,
        concurrency=config.envoy.concurrency,
        replicas=config.backend.replicas,
        contour=f"{fmt.cpu(contour.cpu)} CPU / {contour.memory or '-'}" if contour and contour.cpu else "-",
        knee_rps=knee.rps if knee else None,
        knee_users=knee.users if knee else None,
        status=config.status,
        reason=config.reason,
    )


def _duration(start: str, end: str | None) -> str:
    if not end:
        return "-"
    seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    return f"{seconds / 60:.1f} min"


def _run_facts(summary: RunSummary, scenario: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    overrides = summary.environment.get("overrides") or {}
    status = summary.status + (f": {summary.reason}" if summary.reason else "")
    return (
        ("Run", summary.run_id),
        ("Platform", summary.platform),
        ("Scenario", summary.scenario + (f": {scenario['description']}" if scenario.get("description") else "")),
        ("Overrides", ", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"),
        ("Knee threshold", f"{summary.threshold:.0%} of Envoy's CPU limit"),
        ("Started", summary.started_at),
        ("Duration", _duration(summary.started_at, summary.finished_at)),
        ("Status", status),
    )


def _environment(summary: RunSummary, scenario: dict[str, Any]) -> tuple[EnvRow, ...]:
    env = summary.environment
    versions = dict(env.get("versions") or {})
    machine = env.get("machine") or {}
    load, backend = scenario.get("load") or {}, scenario.get("backend") or {}
    cpus = ", ".join(fmt.cpu(c) for c in sorted({c.envoy.cpu for c in summary.configs}))
    memories = ", ".join(sorted({c.envoy.memory for c in summary.configs}))
    concurrency = ", ".join(str(n) for n in sorted({c.envoy.concurrency for c in summary.configs}))
    replicas = ", ".join(str(n) for n in sorted({c.backend.replicas for c in summary.configs}))

    def version(name: str) -> str:
        return versions.pop(name, None) or "version not recorded"

    envoy = f"{version('envoy')}; CPU limits {cpus or '-'}; memory {memories or '-'}; concurrency {concurrency or '-'}"
    contour = versions.pop("contour", None) or (
        "not used: the local platform programs Envoy as Contour would" if summary.platform == "local" else "-"
    )
    nginx = f"{version('nginx')}; {replicas or '-'} replica(s)"
    if backend.get("worker_processes"):
        nginx += f", {backend['worker_processes']} worker process(es) each"
    locust = version("locust")
    if load.get("workers"):
        locust += f"; 1 master + {load['workers']} worker(s)"
    if load.get("client"):
        locust += f"; {load['client']} client"
    if load.get("mode"):
        locust += "; open-loop target RPS" if load["mode"] == "rps" else "; closed-loop users"
    if load.get("search"):
        locust += f", {load['search']} search"
    if load.get("step_seconds"):
        locust += f"; {load['step_seconds']:g} s windows"
    prometheus = version("prometheus")
    interval = (scenario.get("prometheus") or {}).get("scrape_interval_seconds")
    if interval:
        prometheus += f"; {interval:g} s scrape interval"
    memory = machine.get("memory_bytes")
    host = ", ".join(
        str(part)
        for part in (
            machine.get("cpu_model"),
            f"{machine.get('cpu_cores')} cores" if machine.get("cpu_cores") else None,
            f"{memory / _GIB:.1f} GiB" if memory else None,
            f"Linux {machine['kernel']}" if machine.get("kernel") else None,
            f"cgroup v{env['cgroup_version']}" if env.get("cgroup_version") else None,
            f"Python {machine['python']}" if machine.get("python") else None,
        )
        if part
    )
    rows = [
        EnvRow("Envoy", "Gateway data plane: the system under test", envoy),
        EnvRow("Contour", "Gateway control plane", contour),
        EnvRow("nginx", "Backend service behind the gateway", nginx),
        EnvRow("Locust", "Load generator", locust),
        EnvRow("Prometheus", "Metrics: Envoy CPU, memory and request rate", prometheus),
        EnvRow("Host", "Machine that ran the sweep", host or "not recorded"),
    ]
    rows += [EnvRow(name, "Component", str(value)) for name, value in versions.items()]
    if machine.get("gateway_sizer"):
        rows.append(EnvRow("gateway-sizer", "This tool", str(machine["gateway_sizer"])))
    return tuple(rows)


def _reproduce(summary: RunSummary) -> tuple[str, ...]:
    overrides = summary.environment.get("overrides") or {}
    make = " ".join(
        [f"SCENARIO={shlex.quote(summary.scenario)}"]
        + [f"{k.upper()}={shlex.quote(str(v))}" for k, v in overrides.items()]
    )
    cli = " ".join(
        [f"--scenario {shlex.quote(summary.scenario)}"]
        + [f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in overrides.items()]
    )
    return (
        f"make sweep {make}",
        f"gateway-sizer sweep {cli}",
        f"make report RUN=results/{summary.run_id}",
    )


def _baseline(summary: RunSummary) -> Baseline | None:
    """The backend measured directly and through Envoy, when the run measured it (scenario `baseline`)."""
    measured = summary.baseline
    if measured is None or not measured.direct.get("rps"):
        return None
    return Baseline(
        users=measured.users,
        envoy_cpu=measured.envoy_cpu,
        direct_rps=float(measured.direct["rps"]),
        gateway_rps=float(measured.gateway.get("rps") or 0.0),
        direct_p95_ms=measured.direct.get("p95_ms"),
        gateway_p95_ms=measured.gateway.get("p95_ms"),
        gateway_cpu=measured.gateway.get("cpu_utilization_mean"),
    )


def _no_fit_reason(points: Sequence[KneePoint]) -> str:
    if not points:
        return "no configuration has a valid knee, so there is no sizing rule: see each configuration's reason"
    limits = ", ".join(sorted({fmt.cpu(p.cpu_cores) for p in points}))
    return f"valid knees at one Envoy CPU limit only ({limits}): sweep two or more limits for a sizing rule"


def build_report(
    summary: RunSummary, scenario: dict[str, Any] | None = None, headroom: float = DEFAULT_HEADROOM
) -> Report:
    """The report for one run; `scenario` is the run's resolved scenario.yaml, when there is one."""
    scenario = scenario or {}
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
        knees=tuple(_knee_row(c) for c in summary.configs),
        points=tuple(points),
        fit=fit,
        no_fit_reason=None if fit else _no_fit_reason(points),
        examples=examples,
        conclusions=tuple(conclusions(summary, fit, points)),
        configs=tuple(_section(c, summary.threshold) for c in summary.configs if c.steps),
        reproduce=_reproduce(summary),
        baseline=_baseline(summary),
        notes=tuple(notes),
    )

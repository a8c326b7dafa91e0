"""The report model: everything a renderer shows, built once from a run's summary and read straight down.

summary -> rows (runner.report.rows: each configuration with its windows) -> series (what sizing reads) ->
headline (the figures with their intervals, the machine's drift) -> sizing examples -> conclusions -> tables
(one column list each, laid out by both templates). Renderers (markdown, html, plots) compute nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from runner.model import BaselineResult, RunSummary
from runner.report import formatting as fmt
from runner.report import memory_report, tables
from runner.report.analysis import Conclusion, conclusions
from runner.report.fleet import FleetSection, build_fleet
from runner.report.headline import Headline, build_headline
from runner.report.memory_report import MemorySection, build_memory_section
from runner.report.profiles import ProfileComparison, compare_profiles
from runner.report.recorded import with_fallbacks
from runner.report.rows import ConfigRow, EnvRow, FixedLoad, build_rows
from runner.report.series import build_series
from runner.report.sizing import DEFAULT_HEADROOM, Recommendation, example_targets, recommend
from runner.report.threads import threads_for
from runner.scenario import LoadSpec, Scenario

TIMER_NAMES = {"fine": "fine (timerfd)", "gevent": "gevent.sleep (whole ms)"}  # locustfiles/fine_timer.py

__all__ = ["Report", "Section", "build_report"]

_GIB = 2**30


@dataclass(frozen=True)
class Section:
    """One configuration's section: its row (the headline sentence, the regimes) and its table of windows."""

    row: ConfigRow
    steps: tables.Table


@dataclass(frozen=True)
class Tables:
    """Every table of the report but the windows', each built once from one column list."""

    series: tables.Table | None
    ratios: tables.Table | None
    examples: tables.Table | None
    knees: tables.Table | None
    profiles: tables.Table | None
    connection_costs: tables.Table | None
    baseline: tables.Table | None
    fixed_loads: tables.Table | None
    environment: tables.Table
    run: tables.Table
    memory_examples: tables.Table | None = None
    memory_points: tables.Table | None = None
    contour_routes: tables.Table | None = None
    fleet: tables.Table | None = None


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
    notes: tuple[str, ...]
    headline: Headline
    rows: tuple[ConfigRow, ...]
    examples: tuple[Recommendation, ...]
    conclusions: tuple[Conclusion, ...]
    sections: tuple[Section, ...]
    tables: Tables
    reproduce: tuple[str, ...]
    rounds: bool  # the run measured interleaved rounds
    profiles: ProfileComparison | None = None
    baseline: BaselineResult | None = None
    memory: MemorySection | None = None  # the memory model (runner.report.memory_report)
    fleet: FleetSection | None = None  # configurations of several Envoy pods (runner.report.fleet)
    threads: tuple[str, ...] = ()  # which worker threads the sizing holds for, and what to set (runner.report.threads)

    @property
    def no_sizing_reason(self) -> str | None:
        """Why the report has no figure to size from, or None."""
        if self.headline.series is not None:
            return None
        if self.memory is not None and not self.rows:
            return "this run measured the memory model only (memory.only), no knee: see Memory below"
        if self.rows and all(r.config.envoy.replicas > 1 for r in self.rows):
            return "this run measured fleets of several Envoy pods only, and sizing reads one pod's knee (see Fleet)"
        return "no configuration has a valid knee, so there is nothing to size from: see each configuration's reason"


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


def _scrape_interval(summary: RunSummary, scenario: Scenario | None) -> float | None:
    """The scrape interval the run's guards judged with (recorded on its results), else its scenario's (a run
    without a configuration, the memory model's alone)."""
    recorded = next((c.scrape_interval_s for c in summary.configs if c.scrape_interval_s is not None), None)
    if recorded is None and scenario is not None:
        return scenario.prometheus.scrape_interval_s
    return recorded


def _environment(summary: RunSummary, scenario: Scenario | None) -> tuple[EnvRow, ...]:
    versions = dict(summary.environment.versions)

    def version(name: str) -> str:
        return versions.pop(name, None) or "version not recorded"

    configs = summary.configs
    specs = [(c.envoy.cpu_cores, c.envoy.memory, c.envoy.concurrency) for c in configs]
    pods = sorted({c.envoy.replicas for c in configs}) or [1]
    if summary.memory is not None:  # the memory experiment's Envoy
        specs.append((summary.memory.envoy_cpu_cores, summary.memory.envoy_memory, summary.memory.concurrency))
    envoy = (
        f"{version('envoy')}; CPU limits {_joined(fmt.cpu(c) for c in sorted({s[0] for s in specs}))}; "
        f"memory {_joined(sorted({s[1] for s in specs}))}; "
        f"concurrency {_joined(fmt.concurrency(n) for n in sorted({s[2] for s in specs}))}; "
        f"{_joined(pods)} pod(s) per configuration"
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
    if (interval := _scrape_interval(summary, scenario)) is not None:
        prometheus += f"; {interval:g} s scrape interval"
    loop, timer = versions.pop("gevent loop", None), versions.pop("send timer", None)
    if loop or timer:
        waits = [f"gevent loop {loop}" if loop else "", f"send timer {TIMER_NAMES.get(timer, timer)}" if timer else ""]
        locust += f"; {', '.join(w for w in waits if w)} in the workers"
    rows = [
        EnvRow("Envoy", "Gateway data plane: the system under test", envoy),
        EnvRow("Contour", "Gateway control plane", contour),
        EnvRow("nginx", "Backend service behind the gateway", nginx),
        EnvRow("Locust", "Load generator", locust),
        EnvRow("Prometheus", "Metrics: Envoy CPU, memory and request rate", prometheus),
        EnvRow("Host", "Machine that ran the sweep", _host(summary)),
    ]
    fleet = summary.environment.fleet
    if fleet is not None:
        copied = f", copied from {fleet.copied_from}" if fleet.copied_from else ""
        differences = f"; differs in: {'; '.join(fleet.differences)}" if fleet.differences else ""
        rows.append(
            EnvRow("Measured", "The Envoy pods the run sized", f"{fleet.target}: {fleet.workload}{copied}{differences}")
        )
    if summary.limit_changes:
        rows.append(EnvRow("Limit changes", "How Envoy's limits changed between configurations", summary.limit_changes))
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


def _baseline(summary: RunSummary) -> BaselineResult | None:
    """The backend measured directly and through Envoy, when the run measured it (scenario `baseline`)."""
    measured = summary.baseline
    return measured if measured is not None and measured.direct.rps else None


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


def _notes(summary: RunSummary) -> tuple[str, ...]:
    if summary.status == "complete":
        return ()
    reason = f" ({summary.reason})" if summary.reason else ""
    return (f"The run is {summary.status}{reason}: this report covers the configurations that finished.",)


def _tables(
    headline: Headline,
    rows: tuple[ConfigRow, ...],
    examples: tuple[Recommendation, ...],
    profiles: ProfileComparison | None,
    baseline: BaselineResult | None,
    fixed_loads: tuple[FixedLoad, ...],
    environment: tuple[EnvRow, ...],
    run_facts: tuple[tuple[str, str], ...],
    memory: MemorySection | None,
    fleet: FleetSection | None,
) -> Tables:
    """Every table but the windows', from the parts of the report already built."""
    series = headline.series
    costs = profiles.connection_costs if profiles else ()
    return Tables(
        memory_examples=memory_report.example_table(memory) if memory and memory.examples else None,
        memory_points=memory_report.point_table(memory) if memory else None,
        contour_routes=memory_report.contour_table(memory) if memory and memory.control_plane_rows else None,
        series=tables.series_table(series) if series is not None else None,
        ratios=tables.ratio_table(headline.ratios) if headline.ratios else None,
        examples=tables.examples_table(examples) if examples else None,
        knees=tables.knee_table(rows) if rows else None,
        profiles=tables.profile_table(profiles) if profiles else None,
        connection_costs=tables.connection_cost_table(costs) if costs else None,
        baseline=tables.baseline_table(baseline) if baseline else None,
        fixed_loads=tables.fixed_load_table(fixed_loads) if fixed_loads else None,
        environment=tables.environment_table(environment),
        run=tables.run_table(run_facts),
        fleet=tables.fleet_table(fleet.rows) if fleet is not None else None,
    )


def build_report(summary: RunSummary, scenario: Scenario | None = None, headroom: float = DEFAULT_HEADROOM) -> Report:
    """The report for one run; `scenario` is the run's resolved scenario, when it has one that still loads."""
    summary = with_fallbacks(summary, scenario)
    rows = build_rows(summary)
    series = build_series(summary)
    headline = build_headline(summary, rows, series)
    examples = tuple(recommend(series, t, headroom) for t in example_targets(series)) if series else ()
    profiles = compare_profiles(rows, headline, headroom)
    rounds = summary.rounds is not None and len(summary.rounds.rounds) > 1
    baseline, fixed_loads = _baseline(summary), _fixed_loads(summary, scenario)
    environment, run_facts = _environment(summary, scenario), _run_facts(summary, scenario)
    memory = build_memory_section(summary.memory, headroom)
    fleet = build_fleet(summary)
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
        notes=_notes(summary),
        headline=headline,
        rows=rows,
        examples=examples,
        conclusions=tuple(conclusions(summary, rows, headline)),
        sections=tuple(Section(r, tables.step_table(r, rounds)) for r in rows if r.steps),
        tables=_tables(
            headline, rows, examples, profiles, baseline, fixed_loads, environment, run_facts, memory, fleet
        ),
        reproduce=_reproduce(summary),
        rounds=rounds,
        profiles=profiles,
        baseline=baseline,
        memory=memory,
        fleet=fleet,
        threads=tuple(threads_for(series.largest, series.largest.cores, summary, scenario).lines()) if series else (),
    )

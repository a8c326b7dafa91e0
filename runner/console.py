"""What a person sees in the terminal: progress while the sweep runs, the reference-style table at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.status import Status
from rich.table import Table

from runner.model import BaselineResult, ConfigResult, LoadLevel, MemoryPoint, RunSummary, Step
from runner.observer import SweepObserver
from runner.plan import Configuration, Plan
from runner.platforms.base import Endpoints
from runner.quantities import format_cpu
from runner.report.formatting import capacity_text, drift_text, knee_text, millicores, percent_range
from runner.results import RunStore

if TYPE_CHECKING:
    from runner.assess import Assessment


def describe_level(level: LoadLevel) -> str:
    if level.target_rps is not None:
        return f"{level.target_rps:,.0f} RPS offered by {level.users} users"
    return f"{level.users} users, no wait"


def _mib(value: float | None) -> str:
    return f"{value / 2**20:,.1f} MiB" if value is not None else "-"


def memory_text(point: MemoryPoint) -> str:
    """'held 10,000 (Envoy 10,011 active)  working set 512.0 MiB (max 514.2)  heap 430.0 MiB  ...'"""
    active = f"{point.envoy_connections:,.0f}" if point.envoy_connections is not None else "-"
    cpu = f"{point.envoy_cpu_cores:.3f}" if point.envoy_cpu_cores is not None else "-"
    cost = f"{point.cpu_per_request_us:,.0f} us" if point.cpu_per_request_us is not None else "-"
    return (
        f"held {point.held:,} (Envoy {active} active)  working set {_mib(point.working_set_bytes)}"
        f" (max {_mib(point.working_set_max_bytes)})  heap {_mib(point.heap_bytes)}"
        f"  allocated {_mib(point.allocated_bytes)}  CPU {cpu} cores  RPS {point.rps or 0:,.1f}"
        f"  Envoy RPS {point.envoy_rps or 0:,.1f}  CPU per request {cost}" + _control_plane_text(point)
    )


def _control_plane_text(point: MemoryPoint) -> str:
    """'  Contour 3m CPU, 41.2 MiB  routes added 90: p50 0.52 s, p99 0.81 s of 10 timed' (or nothing)"""
    text = ""
    if point.contour_cpu_cores is not None or point.contour_working_set_bytes is not None:
        text += f"  Contour {millicores(point.contour_cpu_cores)} CPU, {_mib(point.contour_working_set_bytes)}"
    timing = point.programming
    if timing is not None and timing.samples_s:
        text += (
            f"  routes added {timing.created:,}: p50 {timing.p50_s or 0:.2f} s, p99 {timing.p99_s or 0:.2f} s "
            f"of {len(timing.samples_s)} timed"
        )
    return text


def _outcome(config: ConfigResult) -> str:
    """The summary table's last cell: the valid knee with its interval and per core, the capacity, the status."""
    knee = config.valid_knee
    if knee is None:
        return f"{config.status}\n{config.reason or ''}".rstrip()
    capacity = f"\ncapacity {capacity_text(config.capacity)}" if config.capacity is not None else ""
    return f"{knee_text(knee, config.envoy.cpu_cores)}{capacity}\n{config.status}"


class ConsoleObserver(SweepObserver):
    """Prints the sweep's progress with rich: a live status line on a terminal; piped (a CI log), one line
    per phase and per step, never wrapped in the middle of a figure."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._status: Status | None = None

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None:
        c = self.console
        c.print(f"[bold]gateway-sizer[/] run [cyan]{store.summary.run_id}[/]: {len(plan)} configuration(s)")
        c.print(f"  results:      {store.run_dir}")
        c.print(f"  Locust UI:    {endpoints.locust_web_ui}")
        c.print(f"  Prometheus:   {endpoints.prometheus}")
        c.print(f"  gateway:      {endpoints.gateway}")

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        if planned > 1:
            more = "" if number <= planned else " (more: an interval is wider than its target)"
            self.console.print(f"\n[bold]round {number} of {planned}{more}[/]")

    def config_started(self, position: int, total: int, config: Configuration) -> None:
        self.console.print(f"\n[bold][{position}/{total}] {config.label}[/]")

    def config_skipped(self, config: Configuration, result: ConfigResult) -> None:
        self.console.print(f"\n[dim]{config.label}: already {result.status} in this run, skipped[/]")

    def components_restarted(self, names: list[str]) -> None:
        self._stop_status()
        self.console.print(f"  [yellow]restarted[/] {', '.join(names)} (they had died)")

    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None:
        self._stop_status()
        text = f"  {phase} {seconds:.0f} s at {describe_level(level)}"
        if self.console.is_terminal:
            self._status = status = self.console.status(text)
            status.start()
        else:
            self.console.print(f"[dim]{text}[/]")

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def step_measured(self, config: Configuration, step: Step) -> None:
        self._stop_status()
        target = f"{step.target_rps:>7,.0f}" if step.target_rps is not None else "      -"
        p95 = f"{step.p95_ms:.0f} ms" if step.p95_ms is not None else "-"
        regime = f"  throttled {step.throttled_share:.0%}" if step.regime == "throttled" else ""
        control = "  (control)" if step.control else ""
        if len(step.pods) > 1:  # the CPU is the busiest pod's: each pod's beside it
            control += f"  pods {' '.join(f'{p.cpu_utilization_mean:.0%}' for p in step.pods)}"
        self.console.print(
            f"  step {step.index + 1:>2}  offered {target}  users {step.users:>4}  RPS {step.rps:>8,.1f}"
            f"  Envoy RPS {step.envoy_rps:>8,.1f}  CPU {step.cpu_utilization_mean:>4.0%}"
            f" ({percent_range(step.cpu_utilization_min, step.cpu_utilization_max)})"
            f"  p95 {p95}  failures {step.fail_ratio:.2%}{regime}{control}"
        )
        for guard in step.guards:
            self.console.print(f"    [yellow]guard {guard.guard}[/]: {guard.detail}")

    def visit_finished(self, result: ConfigResult, assessment: Assessment) -> None:
        self._stop_status()
        knee = assessment.valid_knee
        rounds = len({s.round for s in result.steps})
        so_far = (
            knee_text(knee, result.envoy.fleet_cpu_cores) if knee is not None else f"no knee yet ({assessment.status})"
        )
        self.console.print(f"  [dim]so far, {rounds} round(s): {so_far}[/]")

    def config_finished(self, result: ConfigResult) -> None:
        self._stop_status()
        if result.knee is not None and result.status == "saturated":
            capacity = f"; capacity {capacity_text(result.capacity)}" if result.capacity is not None else ""
            self.console.print(f"  [green]knee[/] {knee_text(result.knee, result.envoy.fleet_cpu_cores)}{capacity}")
            pods = result.pod_knee
            if pods is not None and pods.pods > 1:
                spread = f", imbalance {pods.imbalance:.2f}" if pods.imbalance is not None else ""
                self.console.print(f"  [green]knee per pod[/] of {pods.pods}: {knee_text(pods.knee)}{spread}")
        else:
            self.console.print(f"  [yellow]{result.status}[/]: {result.reason}")
        if result.search:
            self.console.print(f"  [dim]search: {result.search}[/]")

    def baseline_measured(self, baseline: BaselineResult) -> None:
        self._stop_status()
        self.console.print(
            f"\n[bold]baseline[/] ({baseline.users} closed-loop users):"
            f" nginx directly {baseline.direct.rps:,.0f} RPS,"
            f" through Envoy ({format_cpu(baseline.envoy_cpu_cores)} CPU) {baseline.gateway.rps:,.0f} RPS:"
            f" {baseline.gateway_share:.0%} of direct"
        )

    def memory_point_started(self, position: int, total: int, label: str) -> None:
        self._stop_status()
        self.console.print(f"\n[bold][memory {position}/{total}] {label}[/]")

    def memory_point_skipped(self, label: str) -> None:
        self.console.print(f"\n[dim]memory: {label}: already measured in this run, skipped[/]")

    def memory_point_measured(self, point: MemoryPoint) -> None:
        self._stop_status()
        if not point.measured:
            self.console.print(f"  [yellow]failed[/]: {point.reason}")
            return
        self.console.print(f"  {memory_text(point)}")

    def summary(self, summary: RunSummary, run_dir: str) -> None:
        """The reference report's table: Envoy spec, users, RPS, CPU utilization range, knee."""
        self._stop_status()
        if not summary.configs and summary.memory is not None:  # a memory-only run: its fits, no knee table
            from runner.report.memory_fit import memory_fits  # scipy: only when there is a model to fit

            fits = memory_fits(summary.memory)
            self.console.print(f"\n[bold]Run {summary.run_id} ({summary.status})[/]")
            self.console.print(f"  memory per held connection: {fits.describe_connections()}")
            self.console.print(f"  memory per 1,000 routes:    {fits.describe_routes()}")
            if (contour := fits.describe_contour_routes()) is not None:
                self.console.print(f"  Contour per 1,000 routes:   {contour}")
            self.console.print(f"Results: {run_dir}")
            return
        from runner.figures import control_drift  # scipy: only for the summary at the end

        table = Table(title=f"Run {summary.run_id} ({summary.status})", show_lines=True)
        for column in ("Configuration", "Users", "RPS", "CPU utilization", "Knee (RPS at threshold), capacity"):
            table.add_column(column, justify="right" if column in ("Users", "RPS") else "left")
        for config in summary.configs:
            users = "\n".join(str(s.users) for s in config.steps) or "-"
            rps = "\n".join(f"{s.rps:,.0f}" for s in config.steps) or "-"
            cpu = "\n".join(percent_range(s.cpu_utilization_min, s.cpu_utilization_max) for s in config.steps)
            table.add_row(config.label.replace(", ", "\n"), users, rps, cpu or "-", _outcome(config))
        self.console.print()
        self.console.print(table)
        self.console.print(f"Machine: {drift_text(control_drift(summary), summary.rounds)}")
        self.console.print(f"Results: {run_dir}")

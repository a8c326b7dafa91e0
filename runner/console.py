"""What a person sees in the terminal: progress while the sweep runs, the reference-style table at the end."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from runner.measure import LoadLevel, Step
from runner.plan import Configuration, Plan
from runner.platforms.base import Endpoints
from runner.quantities import format_cpu
from runner.results import BaselineResult, ConfigResult, RunStore, RunSummary


def percent_range(low: float, high: float) -> str:
    """ "58%-70%", as the reference report writes CPU utilization."""
    return f"{low:.0%}-{high:.0%}"


def describe_level(level: LoadLevel) -> str:
    if level.target_rps is not None:
        return f"{level.target_rps:,.0f} RPS offered by {level.users} users"
    return f"{level.users} users, no wait"


class ConsoleObserver:
    """Prints the sweep's progress with rich (plain lines when not on a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._status = None

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None:
        c = self.console
        c.print(f"[bold]gateway-sizer[/] run [cyan]{store.summary.run_id}[/]: {len(plan)} configuration(s)")
        c.print(f"  results:      {store.run_dir}")
        c.print(f"  Locust UI:    {endpoints.locust_web_ui}")
        c.print(f"  Prometheus:   {endpoints.prometheus}")
        c.print(f"  gateway:      {endpoints.gateway}")

    def config_started(self, position: int, total: int, config: Configuration) -> None:
        self.console.print(f"\n[bold][{position}/{total}] {config.label}[/]")

    def config_skipped(self, config: Configuration, result: ConfigResult) -> None:
        self.console.print(f"\n[dim]{config.label}: already {result.status} in this run, skipped[/]")

    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None:
        self._stop_status()
        if self.console.is_terminal:
            self._status = self.console.status(f"  {phase} {seconds:.0f} s at {describe_level(level)}")
            self._status.start()

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def step_measured(self, config: Configuration, step: Step) -> None:
        self._stop_status()
        target = f"{step.target_rps:>7,.0f}" if step.target_rps is not None else "      -"
        p95 = f"{step.p95_ms:.0f} ms" if step.p95_ms is not None else "-"
        self.console.print(
            f"  step {step.index + 1:>2}  offered {target}  users {step.users:>4}  RPS {step.rps:>8,.1f}"
            f"  Envoy RPS {step.envoy_rps:>8,.1f}  CPU {step.cpu_utilization_mean:>4.0%}"
            f" ({percent_range(step.cpu_utilization_min, step.cpu_utilization_max)})"
            f"  p95 {p95}  failures {step.fail_ratio:.2%}"
        )
        for guard in step.guards:
            self.console.print(f"    [yellow]guard {guard['guard']}[/]: {guard['detail']}")

    def config_finished(self, result: ConfigResult) -> None:
        self._stop_status()
        if result.knee is not None and result.status == "saturated":
            self.console.print(
                f"  [green]knee[/] {result.knee.rps:,.0f} RPS at {result.knee.cpu_utilization:.0%} CPU"
                f" ({result.knee.rps / result.envoy.cpu:,.0f} RPS per core)"
            )
        else:
            self.console.print(f"  [yellow]{result.status}[/]: {result.reason}")

    def baseline_measured(self, baseline: BaselineResult) -> None:
        self._stop_status()
        self.console.print(
            f"\n[bold]baseline[/] ({baseline.users} closed-loop users):"
            f" nginx directly {baseline.direct['rps']:,.0f} RPS,"
            f" through Envoy ({format_cpu(baseline.envoy_cpu)} CPU) {baseline.gateway['rps']:,.0f} RPS:"
            f" {baseline.gateway_share:.0%} of direct"
        )

    def summary(self, summary: RunSummary, run_dir: str) -> None:
        """The reference report's table: Envoy spec, users, RPS, CPU utilization range, knee."""
        self._stop_status()
        table = Table(title=f"Run {summary.run_id} ({summary.status})", show_lines=True)
        for column in ("Envoy", "Users", "RPS", "CPU utilization", "Knee (RPS at threshold)"):
            table.add_column(column, justify="right" if column in ("Users", "RPS") else "left")
        for config in summary.configs:
            spec = f"{format_cpu(config.envoy.cpu)} CPU / {config.envoy.memory}\nnginx x{config.backend.replicas}"
            users = "\n".join(str(s["users"]) for s in config.steps) or "-"
            rps = "\n".join(f"{s['rps']:,.0f}" for s in config.steps) or "-"
            cpu = "\n".join(percent_range(s["cpu_utilization_min"], s["cpu_utilization_max"]) for s in config.steps)
            if config.knee is not None:
                knee = f"{config.knee.rps:,.0f} RPS\n{config.status}"
            else:
                knee = f"{config.status}\n{config.reason or ''}"
            table.add_row(spec, users, rps, cpu or "-", knee)
        self.console.print()
        self.console.print(table)
        self.console.print(f"Results: {run_dir}")

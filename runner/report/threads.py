"""Envoy's worker threads (`--concurrency`) in `recommend`: the count the figures hold for, and what to set.

The sweep ran Envoy with one of the scenario's envoy.concurrency values: `auto`, one worker thread per started core
of the CPU limit (runner.scenario.EnvoySpec.concurrency_for); a number; `default`, Envoy's own, one per CPU of the
node (a provisioned gateway, whose args the run cannot set); or `production`, what the production gateway runs (a
sizing fleet's default: its --concurrency, else Envoy's own). The count Envoy ran with, as it reported it, is in
each configuration's record (EnvoyResources.threads). Production Envoy without the flag runs one worker
per CPU of its node, 16 on a 16-core node, whatever its CPU limit: that is not what was measured, and under a
CFS quota of a few cores 16 workers contend for it (routercap found capacity follows the workers, not only the
limit). So `recommend` names the flag with the count for the CPU it recommends, by the run's own rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from runner.model import RunSummary
from runner.report import formatting as fmt
from runner.report.series import Rate
from runner.scenario import Scenario
from runner.scenario.threads import ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY

__all__ = ["Threads", "threads_for"]

Rule = Literal["auto", "fixed", "default", "production"]


@dataclass(frozen=True)
class Threads:
    """The worker threads of the configuration that sizes the answer (`measured` at `measured_cores`; 0: Envoy's
    default), the run's rule, and the count for `cores` per pod by that rule (None: Envoy's default on nodes of
    an unknown CPU count)."""

    measured: int
    measured_cores: float
    rule: Rule
    cores: float
    node_cpus: int | None = None
    read: int | None = None  # the count Envoy reported for the configuration (None: not read)
    production_flag: int | None = None  # production's own --concurrency (None: unset, or not recorded)

    @property
    def production(self) -> int | None:
        if self.rule == "auto":
            return max(1, math.ceil(round(self.cores, 9)))
        if self.rule == "fixed":
            return self.measured
        if self.rule == "production":
            return self.production_flag or self.read or self.node_cpus
        return self.read or self.node_cpus

    @property
    def flag(self) -> str:
        """ "--concurrency 2" ("--concurrency N" when the count is unknown: Envoy's default on unknown nodes)."""
        return f"--concurrency {self.production or 'N'}"

    @property
    def measured_text(self) -> str:
        """ "--concurrency 1 at 300m (one worker thread per started core of the limit: envoy.concurrency auto)" """
        where = fmt.cpu(self.measured_cores)
        if self.rule == "production":
            flag = self.production_flag
            own = f"--concurrency {flag}" if flag else "no --concurrency: the count its Envoy reports"
            count = f"{self.read} worker threads" if self.read else "production's worker threads"
            return f"{count} at {where}, as the production gateway runs them ({own})"
        if self.rule == "default" or self.measured == 0:
            nodes = f" ({self.read} as Envoy reported)" if self.read else ""
            nodes = nodes or (f" ({self.node_cpus} CPUs on the run's nodes)" if self.node_cpus else "")
            return f"Envoy's default worker threads, its own count{nodes}, at {where}"
        why = {"auto": "one per started core of the limit: envoy.concurrency auto", "fixed": "envoy.concurrency"}
        return f"--concurrency {self.measured} at {where} ({why[self.rule]})"

    def lines(self) -> list[str]:
        """What `recommend` prints: what the figures hold for and what to set, with the caveat that applies."""
        lines = [f"Threads: the figures hold for Envoy with {self.measured_text}."]
        if self.rule == "production":
            lines.append(
                "  nothing to set: production runs them already"
                + (
                    ""
                    if self.production_flag
                    else "; where its args set none, Envoy picks its own count (the node's CPUs, or from Envoy 1.37 "
                    f"its CPU limit's cores): set --concurrency {self.read or 'N'} to hold it"
                )
            )
            return lines
        count = self.production
        if count is None:
            lines.append(
                "  set --concurrency to the CPU count of the nodes the run measured on: the run did not record it"
            )
            return lines
        same = count == self.measured and math.isclose(self.cores, self.measured_cores)
        held = "as measured" if same else f"the run's rule for {fmt.cpu(self.cores)}"
        lines.append(
            f"  set {self.flag} in the envoy container's args for {fmt.cpu(self.cores)} per pod ({held}); without it "
            "Envoy runs one worker per CPU of its node, more threads than its limit's cores: not what was measured"
        )
        if count != self.measured and self.measured:
            lines.append(
                f"  {count} threads at {fmt.cpu(self.cores)} were not measured ({self.measured} at "
                f"{fmt.cpu(self.measured_cores)}): confirm with make sweep ENVOY_CPUS={self.cores:g}"
            )
        return lines


def _rule(summary: RunSummary, scenario: Scenario | None, concurrency: int) -> Rule:
    """The envoy.concurrency value the configuration ran with (`concurrency`: its record's; -1 production's, 0
    Envoy's default); a number told apart from `auto` by the scenario, inferred from the run's configurations when
    its scenario is unreadable."""
    if concurrency == PRODUCTION_CONCURRENCY:
        return "production"
    if concurrency == ENVOY_DEFAULT_CONCURRENCY:
        return "default"
    if scenario is not None:
        values = scenario.envoy.concurrency
        return "fixed" if concurrency in values or "auto" not in values else "auto"
    envoys = [c.envoy for c in summary.configs]
    if any(e.concurrency == 0 for e in envoys):
        return "default"
    auto = all(e.concurrency == max(1, math.ceil(round(e.cpu_cores, 9))) for e in envoys)
    return "auto" if auto else "fixed"


def _node_cpus(summary: RunSummary) -> int | None:
    """The CPU count of the run's nodes when they all have the same (Kubernetes); None otherwise."""
    counts = {node.cpu for node in summary.environment.nodes}
    if len(counts) != 1:
        return None
    (cpu,) = counts
    return int(cpu) if cpu is not None and cpu.isdigit() else None


def threads_for(basis: Rate, cores: float, summary: RunSummary, scenario: Scenario | None) -> Threads:
    """The threads of the configuration `basis` stands on, and the count for `cores` per pod."""
    envoy = basis.config.envoy
    fleet = summary.environment.fleet
    return Threads(
        envoy.concurrency,
        envoy.cpu_cores,
        _rule(summary, scenario, envoy.concurrency),
        cores,
        _node_cpus(summary),
        read=envoy.threads,
        production_flag=fleet.production_concurrency if fleet is not None else None,
    )

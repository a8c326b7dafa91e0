"""Sizing at a latency target, and where it bound. Pure.

`recommend --slo-p99-ms X` recomputes every configuration's capacity at X from its own windows (runner.capacity:
every window that broke counts unless the rounds call it a transient; the interval from the rounds), so the rate
sizing reads (runner.report.series.rate_of) is the capacity where latency breaks before the CPU threshold and the
knee where it does not. A limit at which no window met X is left out, with the lowest p99 it measured. Without
the option the run's own capacities stand, judged at its load.latency_slo_ms (LATENCY_SLO_MS).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from runner.capacity import find_capacity, serves
from runner.errors import UsageError
from runner.model import ConfigResult, RunSummary
from runner.report import formatting as fmt
from runner.report.series import Rate, Series

__all__ = ["at_slo", "latency_lines", "meeting_slo", "open_loop"]


def _open_loop(config: ConfigResult) -> bool:
    return any(s.target_rps is not None for s in config.steps)


def open_loop(summary: RunSummary) -> bool:
    """The run offered rates (load.mode rps), against which a latency target can be judged."""
    return any(_open_loop(c) for c in summary.configs)


def at_slo(summary: RunSummary, slo_ms: float) -> RunSummary:
    """The run with each configuration's capacity judged at `slo_ms` by the capacity's current rules (also a run
    measured before them); UsageError for a run that offered no rate (closed-loop users)."""
    if not open_loop(summary):
        raise UsageError(
            f"run {summary.run_id} offered no rate (closed-loop users): a p99 target is judged against offered rates",
            "size it from a run with load.mode rps (the default), or leave out --slo-p99-ms",
        )
    configs = [c.model_copy(update={"capacity": find_capacity(c.steps, slo_ms)}) for c in summary.configs]
    return summary.model_copy(update={"configs": configs})


def _judged(config: ConfigResult, slo_ms: float) -> bool:
    """Some window of the configuration can tell whether it served (open loop, the generator not at its limit)."""
    return any(serves(s, slo_ms) is not None for s in config.steps)


def _lowest_p99(config: ConfigResult) -> str:
    measured = [s for s in config.steps if s.p99_ms is not None and s.target_rps is not None]
    if not measured:
        return "no p99 measured"
    best = min(measured, key=lambda s: (s.p99_ms, s.offered))
    return f"the lowest p99 there was {best.p99_ms:,.0f} ms at {fmt.rps(best.offered)} RPS"


def meeting_slo(series: Series, slo_ms: float) -> Series:
    """The series without the limits at which no window served within `slo_ms`; UsageError when none is left."""
    kept = tuple(r for r in series.rates if r.config.capacity is not None or not _judged(r.config, slo_ms))
    if not kept:
        missed = "; ".join(f"{fmt.cpu(r.cores)}: {_lowest_p99(r.config)}" for r in series.rates)
        raise UsageError(
            f"no window at any measured limit served p99 <= {slo_ms:g} ms ({missed})",
            "a looser --slo-p99-ms, or a sweep with larger limits (make sweep ENVOY_CPUS=...)",
        )
    return dataclasses.replace(series, rates=kept)


def _where(rate: Rate | None, config: ConfigResult, slo_ms: float, threshold: float) -> str:
    """Where the SLO bound at one measured limit."""
    where = f"at {fmt.cpu(config.envoy.cpu_cores)}"
    capacity, knee = config.capacity, config.valid_knee
    if capacity is None and not _judged(config, slo_ms):
        return f"{where}: no window could tell (closed-loop users, or the generator at its limit): the knee stands"
    if capacity is None:
        return f"{where}: no window served p99 <= {slo_ms:g} ms ({_lowest_p99(config)}): left out"
    text = fmt.capacity_text(capacity)
    if knee is None:
        return f"{where}: capacity {text}; no valid knee"
    if rate is not None and rate.source == "capacity":
        return (
            f"{where}: bound before the {threshold:.0%} CPU threshold: capacity {text}, below the knee "
            f"{fmt.rps(knee.rps)}: sized from the capacity"
        )
    if capacity.broken_at is None:
        return (
            f"{where}: did not bind: served within it up to {fmt.rps(capacity.rps)} RPS, the most measured, past "
            f"the knee {fmt.rps(knee.rps)}"
        )
    return f"{where}: did not bind before the CPU threshold: capacity {text}, past the knee {fmt.rps(knee.rps)}"


def latency_lines(
    configs: Sequence[ConfigResult], sized: Series, slo_ms: float, threshold: float, source: str
) -> list[str]:
    """What `recommend` prints about latency: the target (`source` says whose), where it bound at each measured
    limit of `configs`, and the transients dropped on the way (runner.capacity); `sized` is the series the answer
    reads."""
    if not any(_open_loop(c) for c in configs):
        return ["Latency: not judged: the run offered no rate (closed-loop users), so its p99 says nothing of a rate"]
    rates = {r.config.key: r for r in sized.rates}
    lines = [f"Latency: p99 <= {slo_ms:g} ms ({source}):"]
    for config in sorted(configs, key=lambda c: c.envoy.cpu_cores):
        lines.append(f"  {_where(rates.get(config.key), config, slo_ms, threshold)}")
        if config.capacity is not None:
            lines += [f"    dropped {t}" for t in config.capacity.transients]
    return lines

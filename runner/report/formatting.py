"""Number formats shared by the report's renderers and the CLI's sizing output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.profiles import encoding_text
from runner.quantities import format_cpu

if TYPE_CHECKING:
    from runner.figures import ControlDrift
    from runner.model import Capacity, Knee, RoundsRecord

__all__ = [
    "capacity_text",
    "compression",
    "cpu",
    "decimal",
    "drift_text",
    "interval",
    "interval_source",
    "knee_from",
    "knee_source",
    "knee_text",
    "mebibytes",
    "microseconds",
    "millicores",
    "ms",
    "percent",
    "percent_range",
    "rps",
    "signed_percent",
    "signed_share",
    "times",
]

MIN_ROUNDS = 3  # runner.curve.MIN_ROUNDS (the console imports no scipy)

_MIB = 2**20


def rps(value: float | None) -> str:
    """1804.3 -> "1,804"; None -> "-"."""
    return "-" if value is None else f"{value:,.0f}"


def percent(value: float | None, digits: int = 0) -> str:
    """0.904 -> "90%"."""
    return "-" if value is None else f"{value:.{digits}%}"


def signed_percent(value: float | None) -> str:
    """A change in percent with its sign: -7.25 -> "-7.2%", 3 -> "+3.0%"."""
    return "-" if value is None else f"{value:+.1f}%"


def ms(value: float | None) -> str:
    """Latency in milliseconds: 30.0 -> "30 ms"."""
    return "-" if value is None else f"{value:,.0f} ms"


def mebibytes(value: float | None) -> str:
    """Bytes as MiB with one decimal: 21295104 -> "20.3 MiB"."""
    return "-" if not value else f"{value / _MIB:,.1f} MiB"


def cpu(cores: float | None) -> str:
    """Kubernetes CPU form: 0.15 -> "150m"."""
    return "-" if cores is None else format_cpu(cores)


def concurrency(workers: int, threads: int | None = None) -> str:
    """Envoy's worker threads as asked: 0 (Envoy's own default, one per CPU of its node) as "default", -1 (the
    production gateway's own) as "production's"; with `threads`, what that came to: "default (16)"."""
    asked = {0: "default", -1: "production's"}.get(workers, str(workers))
    return asked if threads is None or threads == workers else f"{asked} ({threads})"


def millicores(cores: float | None) -> str:
    """Small CPU figures with a decimal: 0.0034 -> "3.4m"."""
    return "-" if cores is None else f"{cores * 1000:,.1f}m"


def percent_range(low: float, high: float) -> str:
    """ "58%-70%", as the reference report writes CPU utilization."""
    return f"{low:.0%}-{high:.0%}"


def microseconds(value: float | None) -> str:
    """Envoy CPU per request: 189.4 -> "189 \u00b5s"."""
    return "-" if value is None else f"{value:,.0f} \u00b5s"


def signed_share(value: float | None) -> str:
    """A share with its sign: 0.12 -> "+12%", -0.34 -> "-34%"."""
    return "-" if value is None else f"{value:+.0%}"


def decimal(value: float | None, digits: int) -> str:
    """0.1234, 3 -> "0.123"."""
    return "-" if value is None else f"{value:.{digits}f}"


def times(value: float | None) -> str:
    """A ratio: 1.186 -> "1.19x"."""
    return "-" if value is None else f"{value:.2f}x"


def interval(low: float | None, high: float | None, unit: str = "") -> str:
    """ "1,150-1,230" (figures over 10 without decimals, ratios with two), or "-" without an interval."""
    if low is None or high is None:
        return "-"
    if max(abs(low), abs(high)) >= 10:
        return f"{low:,.0f}-{high:,.0f}{unit}"
    return f"{low:.2f}-{high:.2f}{unit}"


def knee_source(knee: Knee) -> str:
    """Where the knee's interval comes from, or why it has none: 'from 5 rounds, 14 windows', 'power fit over
    6 windows', 'no interval: interpolated between 2 windows'."""
    if knee.interval is not None:
        return (
            f"from {knee.rounds} rounds, {knee.windows} windows"
            if knee.rounds
            else f"power fit over {knee.windows} windows"
        )
    if knee.method == "rounds":
        return f"no interval: {knee.rounds} round(s) of windows, an interval needs {MIN_ROUNDS}"
    if knee.method == "power-fit":
        return f"no interval: {knee.windows} windows scatter too much"
    return "interpolated between 2 windows, no interval"


def interval_source(knee: Knee) -> str:
    """Where the knee's interval comes from, or why it has none: '5 interleaved rounds', 'one pass (power fit
    over 6 windows)', 'no interval: one pass, interpolated between 2 windows'."""
    if knee.interval is not None:
        return f"{knee.rounds} interleaved rounds" if knee.rounds else f"one pass ({knee_source(knee)})"
    if knee.method == "rounds":
        return f"no interval: {knee.rounds} round(s) of windows, an interval needs {MIN_ROUNDS}"
    how = f"{knee.windows} windows scatter too much" if knee.method == "power-fit" else "interpolated between 2 windows"
    return f"no interval: one pass, {how}"


def knee_from(knee: Knee) -> str:
    """How far the knee is known: '95% CI 1,148-1,181 RPS, 5 interleaved rounds', or why it has no interval."""
    source = interval_source(knee)
    return f"95% CI {interval(knee.low, knee.high)} RPS, {source}" if knee.interval is not None else source


def knee_text(knee: Knee, cores: float | None = None) -> str:
    """'1,440 RPS, 2,879 per core (95% CI 1,280-1,620 from 5 rounds, 14 windows)', or how it was found
    without an interval."""
    how = knee_source(knee)
    if knee.interval is not None:
        how = f"95% CI {interval(knee.low, knee.high)}, {how}"
    per_core = f", {knee.per_core(cores):,.0f} per core" if cores else ""
    return f"{knee.rps:,.0f} RPS{per_core} ({how})"


def capacity_text(capacity: Capacity | None) -> str:
    """'1,539 RPS (broke at 1,577: p99 ...)', or '-' without one."""
    if capacity is None:
        return "-"
    broke = f"broke at {capacity.broken_at:,.0f}: {capacity.broken_by}" if capacity.broken_at else "not broken"
    ci = f"; 95% CI {interval(*capacity.interval)} over {capacity.rounds} rounds" if capacity.interval else ""
    return f"{capacity.rps:,.0f} RPS ({broke}{ci})"


def drift_text(drift: ControlDrift | None, record: RoundsRecord | None) -> str:
    """The machine's own noise during the run, from its control window; or what the run did not measure."""
    if drift is None:
        if record is None or len(record.rounds) < 2:
            return (
                "one pass, no control window: how far this machine's speed moved during the run was not measured "
                "(runs with interleaved rounds measure it)"
            )
        return (
            f"{len(record.rounds)} rounds, but no control window measured in two of them: how far this machine's "
            "speed moved during the run was not measured"
        )
    low, high = drift.low_high
    steal = f"steal time at most {drift.steal_max:.1%}" if drift.steal_max is not None else "steal time not read"
    return (
        f"this machine's speed moved +-{drift.spread:.1%} during the run, {len(drift.rounds)} rounds (control "
        f"window: {drift.label} at {drift.offered_rps:,.0f} RPS offered, {drift.median_us:,.0f} \u00b5s of Envoy CPU "
        f"per request, {low:+.1%} to {high:+.1%} around it); {steal}"
    )


def compression(asked: str | None) -> str:
    """What the clients asked for: the Accept-Encoding a result recorded; 'not recorded' when it is not known (a
    run saved before results recorded it, without its scenario.yaml: runner.report.recorded)."""
    if asked is None:
        return "compression not recorded (the run's scenario.yaml is missing)"
    return encoding_text(asked)

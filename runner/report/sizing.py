"""Sizing guidance, pure: Envoy cores for a target RPS from what the run measured at each CPU limit.

The required knee is target x (1 + headroom). A measured limit whose rate (runner.report.series: its knee,
or its capacity where latency broke first) reaches it is enough; between two measured limits, the lower rate
per core of the two sizes the cores, capped at the limit that reaches it; beyond the largest, its rate per
core does: conservative when the knee grows faster than the CPU limit, as it does under a sub-core CFS
quota. The rate's 95% interval is carried into the cores. With three limits or more measured in rounds, the
growth knee ~ cores^g (runner.figures) gives a second answer with its interval, and the answer when the knee
grows slower than the limit (where the largest limit's rate per core would fall short). No straight line
through the knees: its intercept is negative whenever the growth is faster than proportional, and it is no
sizing rule then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from runner.errors import UsageError
from runner.model import RunSummary
from runner.quantities import format_cpu, format_memory
from runner.report import formatting as fmt
from runner.report.series import Rate, Series, require_series

__all__ = [
    "CPU_STEP_CORES",
    "DEFAULT_HEADROOM",
    "MEMORY_STEP_BYTES",
    "Recommendation",
    "check_request",
    "example_targets",
    "format_recommendation",
    "recommend",
    "require_fit",
]

DEFAULT_HEADROOM = 0.3
CPU_STEP_CORES = 0.1  # requests are rounded up to 100m
MEMORY_STEP_BYTES = 64 * 2**20  # and to 64Mi
TOLERANCE = 1e-9


@dataclass(frozen=True)
class GrowthSizing:
    """The cores the growth knee ~ cores^g gives for a required knee, anchored at a measured limit, and their
    range over g's interval and the anchor's."""

    cores: float
    interval: tuple[float, float]


@dataclass(frozen=True)
class Recommendation:
    """Envoy resources to request for `target_rps`, sized so that the knee sits `headroom` above it."""

    target_rps: float
    headroom: float
    required_rps: float
    basis: Rate  # the measured limit whose rate per core sizes it
    cores_exact: float
    cores_interval: tuple[float, float] | None  # the cores at either end of the basis's interval
    cpu_cores: float
    memory_bytes: int | None
    peak_memory_bytes: float
    series: Series
    warnings: tuple[str, ...]
    how: How = "beyond"  # see _size; `growth` when the knee grows slower than the limit beyond the largest
    by_growth: GrowthSizing | None = None
    memory_from_model: bool = False  # memory_bytes came from the memory model's fits, not the peak seen

    @property
    def extrapolated(self) -> bool:
        """More cores than the largest measured limit."""
        return self.cores_exact > self.series.largest.cores + TOLERANCE

    @property
    def cpu(self) -> str:
        return format_cpu(self.cpu_cores)

    @property
    def memory(self) -> str:
        return format_memory(self.memory_bytes) if self.memory_bytes else "-"

    @property
    def sized_from(self) -> str:
        """For the report's examples table: which figure sized it."""
        basis = self.basis
        return {
            "below": f"{basis.where} reaches it (the smallest measured limit)",
            "measured": f"{basis.where} reaches it",
            "between": f"{fmt.rps(basis.per_core)} RPS per core at {basis.where}",
            "beyond": f"{fmt.rps(basis.per_core)} RPS per core at {basis.where}, beyond the largest measured limit",
            "growth": f"the growth from {fmt.cpu(basis.cores)}: {self.series.scaling.figure}",
        }[self.how]


def require_fit(summary: RunSummary, profile: str | None = None) -> Series:
    """The run's series for a traffic profile, or a UsageError (the CLI's name for `require_series`)."""
    return require_series(summary, profile)


def _round_up(value: float, step: float) -> float:
    return math.ceil(round(value / step, 9)) * step


def check_request(target_rps: float, headroom: float) -> None:
    """UsageError for a target or headroom that means nothing: not positive, negative, not finite."""
    if not math.isfinite(target_rps) or target_rps <= 0:
        raise UsageError(
            f"--target-rps must be a positive number of requests per second, got {target_rps:g}",
            "e.g. --target-rps 5000",
        )
    if not math.isfinite(headroom) or headroom < 0:
        raise UsageError(f"--headroom must be 0 or more, got {headroom:g}", "0.3 puts the knee 30% above the target")


How = Literal["below", "measured", "between", "beyond", "growth"]


def _size(series: Series, required: float) -> tuple[Rate, float, How]:
    """The rate that sizes `required`, the cores it gives, and how: `below` or `measured` (a measured limit's
    rate reaches it: that limit), `between` (the lower rate per core of the two measured limits around it),
    `beyond` (the largest limit's rate per core)."""
    rates = series.rates
    if required > series.largest.rps:
        return series.largest, required / series.largest.per_core, "beyond"
    index, reaching = next((i, r) for i, r in enumerate(rates) if r.rps >= required)
    if index == 0:
        return reaching, reaching.cores, "below"
    lower = min((rates[index - 1], reaching), key=lambda r: r.per_core)
    cores = required / lower.per_core
    return (reaching, reaching.cores, "measured") if cores >= reaching.cores else (lower, cores, "between")


def _by_growth(series: Series, basis: Rate, required: float) -> GrowthSizing | None:
    """cores = c x (required / rate(c))^(1/g) from the basis limit c; its range over the corners of g's and
    the rate's intervals."""
    growth = series.scaling.growth
    if growth is None:
        return None
    g = growth.exponent
    rates = basis.interval or (basis.rps, basis.rps)
    corners = [basis.cores * (required / rate) ** (1 / e) for e in (g.low, g.high) for rate in rates]
    return GrowthSizing(basis.cores * (required / basis.rps) ** (1 / g.value), (min(corners), max(corners)))


def _scaling_warning(series: Series, rec_cores: float) -> str | None:
    """What the sizing assumes of the cores beyond the largest measured limit."""
    largest = series.largest
    if rec_cores <= largest.cores + TOLERANCE:
        return None
    scaling = series.scaling
    head = (
        f"extrapolated {rec_cores / largest.cores:.1f}x beyond the largest measured limit ({fmt.cpu(largest.cores)}): "
        f"sized at its rate per core"
    )
    if len(series.rates) < 2:
        return f"{head}; one CPU limit measured, so how the rate per core changes with the limit is not known"
    trend = scaling.trend
    if trend == "faster":
        return f"{head}, conservative: the knee grows faster than the CPU limit ({scaling.figure})"
    if trend == "slower":
        return f"{head}; the knee grows slower than the CPU limit ({scaling.figure}): confirm with a larger limit"
    if trend == "proportional":
        return f"{head}; the knee grows in proportion to the CPU limit within the interval ({scaling.figure})"
    return f"{head}; how the knee grows past it is not known with an interval"


def _warnings(rec_how: How, basis: Rate, required: float, series: Series, exact: float) -> list[str]:
    warnings = []
    if rec_how == "below":
        warnings.append(
            f"below the smallest measured limit: {fmt.cpu(basis.cores)} reaches {fmt.rps(basis.rps)} RPS, above the "
            f"{fmt.rps(required)} needed; smaller limits were not measured"
        )
    if rec_how in ("below", "measured") and basis.low is not None and basis.low < required:
        warnings.append(
            f"the 95% interval of {basis.where} reaches down to {fmt.rps(basis.low)} RPS, below the "
            f"{fmt.rps(required)} needed: the next limit up is the safe side"
        )
    if rec_how in ("beyond", "growth"):
        warnings += [w for w in (_scaling_warning(series, exact),) if w]
    if basis.source == "capacity":
        warnings.append(f"sized from the capacity: at {fmt.cpu(basis.cores)} {basis.source_text}")
    return warnings


def recommend(
    series: Series, target_rps: float, headroom: float = DEFAULT_HEADROOM, *, memory_bytes: int | None = None
) -> Recommendation:
    """Cores and memory for `target_rps` with `headroom` (0.3: the knee 30% above the target); memory from
    the peak working set of the series' configurations, unless `memory_bytes` (sized by the memory model)."""
    check_request(target_rps, headroom)
    required = target_rps * (1 + headroom)
    basis, exact, how = _size(series, required)
    per_core = basis.per_core_interval
    interval = None
    if how in ("between", "beyond") and per_core:
        interval = (required / per_core[1], required / per_core[0])
    by_growth = _by_growth(series, basis, required) if how in ("between", "beyond") else None
    if by_growth is not None and how == "beyond" and series.scaling.trend == "slower":
        how, exact, interval = "growth", by_growth.cores, by_growth.interval
    if how in ("below", "measured"):
        cores = basis.cores
    else:
        cores = round(_round_up(max(exact, CPU_STEP_CORES), CPU_STEP_CORES), 3)
        reaching = next((r for r in series.rates if r.cores > basis.cores), None)
        cores = min(cores, reaching.cores) if how == "between" and reaching is not None else cores
    warnings = _warnings(how, basis, required, series, exact)
    peak_memory = series.peak_memory_bytes
    memory = int(_round_up(peak_memory * (1 + headroom), MEMORY_STEP_BYTES)) if peak_memory > 0 else None
    if memory_bytes is not None:
        memory = memory_bytes
    elif memory is not None and required > series.peak_rps:
        warnings.append(
            f"memory measured up to {series.peak_rps:,.0f} RPS only; Envoy's working set grows with connections, "
            "so watch it at the target load"
        )
    return Recommendation(
        target_rps,
        headroom,
        required,
        basis,
        exact,
        interval,
        cores,
        memory,
        peak_memory,
        series,
        tuple(warnings),
        how,
        by_growth,
        memory_bytes is not None,
    )


def _cpu_line(rec: Recommendation) -> str:
    basis, interval = rec.basis, rec.cores_interval
    if rec.how in ("below", "measured"):
        return f"  cpu:     {rec.cpu:<7} ({basis.where} reaches {fmt.rps(basis.rps)} RPS: measured)"
    if rec.how == "growth":
        how = f"{rec.cores_exact:.3f} cores by the growth from {fmt.cpu(basis.cores)}"
    else:
        how = f"{rec.cores_exact:.3f} cores = {fmt.rps(rec.required_rps)} / {fmt.rps(basis.per_core)} RPS per core"
    spread = f"; {interval[0]:.3f}-{interval[1]:.3f} within its 95% interval" if interval else "; no interval"
    return f"  cpu:     {rec.cpu:<7} ({how}{spread}; rounded up to {format_cpu(CPU_STEP_CORES)})"


def format_recommendation(rec: Recommendation, run_id: str) -> str:
    """What `gateway-sizer recommend` prints: first the figure it sizes from with its interval, then the
    resources, how they were reached, and every warning."""
    if rec.memory_from_model:
        memory = f"{rec.memory:<7} (from the memory model: see below)"
    elif rec.memory_bytes is not None:
        memory = (
            f"{rec.memory:<7} (peak working set {fmt.mebibytes(rec.peak_memory_bytes)}, +{rec.headroom:.0%}, "
            f"rounded up to {format_memory(MEMORY_STEP_BYTES)})"
        )
    else:
        memory = "not measured in this run: keep the limit it ran with"
    lines = [
        f"sized from {rec.basis.text}",
        f"Envoy for {rec.target_rps:,.0f} RPS with {rec.headroom:.0%} headroom "
        f"(a knee at {rec.required_rps:,.0f} RPS):",
        _cpu_line(rec),
        f"  memory:  {memory}",
    ]
    if rec.memory_bytes is not None:
        lines.append(f"  resources: requests = limits = {{cpu: {rec.cpu}, memory: {rec.memory}}}")
    growth = rec.by_growth
    if growth is not None and rec.how != "growth":
        low, high = growth.interval
        lines.append(f"growth: {rec.series.scaling.figure}: {growth.cores:.3f} cores by it ({low:.3f}-{high:.3f})")
    lines.append(f"run {run_id}: {rec.series.traffic}")
    lines.append(rec.series.scaling.text)
    lines += [f"warning: {w}" for w in rec.warnings]
    return "\n".join(lines)


def example_targets(series: Series, count: int = 4) -> list[float]:
    """Round target RPS (1-2-5 series) from the smallest measured rate upwards, for the report's sizing table."""
    low = max(series.smallest.rps, 1.0)
    exponent = math.floor(math.log10(low))
    targets: list[float] = []
    while len(targets) < count:
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exponent
            if value >= low and len(targets) < count:
                targets.append(value)
        exponent += 1
    return targets

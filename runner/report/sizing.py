"""Sizing guidance, pure: a least-squares line through the knees (RPS against Envoy cores) and what it implies.

The fit's slope is the RPS each added Envoy core buys at the knee (90% CPU); `recommend` inverts it for a
target RPS with headroom: cores = (target x (1 + headroom) - intercept) / slope, rounded up.

The slope's 95% interval combines two uncertainties: the knees' own (each knee's interval, propagated
through the least-squares weights) and, with three knees or more, the line's residual scatter (with
Student's t for its few degrees of freedom). So two knees measured to +-3% give a slope known to about
+-5-10%, and the sizing says so instead of "R^2 1.000".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from runner.errors import UsageError
from runner.model import ConfigResult, Knee, RunSummary
from runner.profiles import PLAIN
from runner.quantities import format_cpu, format_memory
from runner.report import formatting as fmt

__all__ = [
    "DEFAULT_HEADROOM",
    "Fit",
    "KneePoint",
    "Recommendation",
    "check_request",
    "example_targets",
    "fit_knees",
    "format_recommendation",
    "knee_points",
    "recommend",
    "require_fit",
    "valid_knee",
]

DEFAULT_HEADROOM = 0.3
CPU_STEP_CORES = 0.1  # requests are rounded up to 100m
MEMORY_STEP_BYTES = 64 * 2**20  # and to 64Mi
LINEAR_R_SQUARED = 0.95  # at or above: knee RPS is called linear in cores
CONFIDENCE = 0.95
SWEEP_HINT = "sweep two or more Envoy CPU limits, e.g. make sweep ENVOY_CPUS=0.15,0.3"


@dataclass(frozen=True)
class KneePoint:
    """One configuration's valid knee, and the most memory Envoy used in that configuration."""

    label: str
    cpu_cores: float
    rps: float
    peak_memory_bytes: float
    peak_rps: float
    low: float | None = None  # the knee's 95% interval, when it has one
    high: float | None = None

    @property
    def rps_per_core(self) -> float:
        return self.rps / self.cpu_cores


@dataclass(frozen=True)
class Fit:
    """knee RPS = slope x cores + intercept, by least squares over `points`."""

    slope: float
    intercept: float
    r_squared: float
    points: tuple[KneePoint, ...]
    slope_interval: tuple[float, float] | None = field(default=None, compare=False)

    @property
    def cores_range(self) -> tuple[float, float]:
        cores = [p.cpu_cores for p in self.points]
        return min(cores), max(cores)

    @property
    def rps_range(self) -> tuple[float, float]:
        knees = [p.rps for p in self.points]
        return min(knees), max(knees)

    def rps_at(self, cores: float) -> float:
        return self.slope * cores + self.intercept

    def equation(self) -> str:
        """ "knee RPS = 8,534 x cores - 756" """
        sign = "-" if self.intercept < 0 else "+"
        return f"knee RPS = {self.slope:,.0f} x cores {sign} {abs(self.intercept):,.0f}"

    def slope_text(self) -> str:
        """ "8,534 RPS per core (95% CI 7,900-9,200)" """
        interval = self.slope_interval
        ci = f" (95% CI {interval[0]:,.0f}-{interval[1]:,.0f})" if interval else ""
        return f"{self.slope:,.0f} RPS per core{ci}"

    def describe(self) -> str:
        """ "knee RPS = 8,534 x cores - 756 (slope 95% CI 7,900-9,200, R^2 1.000, 2 knees at 150m-300m)" """
        low, high = self.cores_range
        knees = f"{len(self.points)} knees at {fmt.cpu(low)}-{fmt.cpu(high)}"
        interval = self.slope_interval
        ci = f"slope 95% CI {interval[0]:,.0f}-{interval[1]:,.0f}, " if interval else ""
        return f"{self.equation()} ({ci}R^2 {self.r_squared:.3f}, {knees})"

    def cores_for(self, rps: float) -> tuple[float, float] | None:
        """The cores a knee of `rps` needs at either end of the slope's interval (the line pivots on the
        knees' centroid), low first; None without an interval or when it reaches a flat slope."""
        if self.slope_interval is None or self.slope_interval[0] <= 0:
            return None
        mean_x = sum(p.cpu_cores for p in self.points) / len(self.points)
        mean_y = sum(p.rps for p in self.points) / len(self.points)
        ends = sorted(mean_x + (rps - mean_y) / slope for slope in self.slope_interval)
        return ends[0], ends[1]

    def extrapolation(self, cores: float) -> float:
        """How far `cores` lies outside the measured limits, as a factor (1.0 inside them)."""
        low, high = self.cores_range
        if cores > high:
            return cores / high
        if cores < low:
            return low / cores if cores > 0 else math.inf
        return 1.0

    def caveats(self) -> list[str]:
        """What limits trust in the line, each with what to do."""
        notes = []
        if self.slope <= 0:
            notes.append(
                f"knee RPS does not grow with Envoy cores (slope {self.slope:,.0f} RPS per core): "
                "something other than Envoy's CPU limited the run; check the configurations' status and reason"
            )
        if len(self.points) == 2:
            notes.append("two knees fit any line exactly (R^2 = 1): sweep a third CPU limit to check it is straight")
        elif self.r_squared < LINEAR_R_SQUARED:
            notes.append(
                f"knee RPS is not linear in Envoy cores (R^2 {self.r_squared:.2f}): trust recommendations only "
                "near the measured limits"
            )
        return notes


@dataclass(frozen=True)
class Recommendation:
    """Envoy resources to request for `target_rps`, sized so the knee sits `headroom` above it."""

    target_rps: float
    headroom: float
    required_rps: float
    cores_exact: float
    cpu_cores: float
    memory_bytes: int | None
    peak_memory_bytes: float
    fit: Fit
    warnings: tuple[str, ...]
    cores_interval: tuple[float, float] | None = None  # the cores needed at either end of the slope's interval
    memory_from_model: bool = False  # memory_bytes came from the memory model's fits, not the peak seen

    @property
    def extrapolated(self) -> bool:
        low, high = self.fit.cores_range
        return not low <= self.cores_exact <= high

    @property
    def cpu(self) -> str:
        return format_cpu(self.cpu_cores)

    @property
    def memory(self) -> str:
        return format_memory(self.memory_bytes) if self.memory_bytes else "-"


def valid_knee(config: ConfigResult) -> Knee | None:
    """A configuration's knee when it counts: the configuration ended `saturated` (no guard fired)."""
    return config.valid_knee


def sizing_profile(summary: RunSummary) -> str:
    """The traffic profile the sizing rule is for: the scenario's first (plain when it named none)."""
    return summary.configs[0].profile.name if summary.configs else PLAIN


def knee_points(summary: RunSummary, profile: str | None = None) -> list[KneePoint]:
    """The valid knees of one traffic profile (default: `sizing_profile`): the only ones sizing may use.
    Profiles are not pooled: a TLS handshake per request costs many keep-alive requests."""
    name = profile or sizing_profile(summary)
    points = []
    for config in summary.configs:
        knee = valid_knee(config)
        if knee is None or config.profile.name != name:
            continue
        memory = max((s.envoy_memory_bytes for s in config.steps), default=0.0)
        peak_rps = max((s.rps for s in config.steps), default=0.0)
        points.append(KneePoint(config.label, config.envoy.cpu_cores, knee.rps, memory, peak_rps, knee.low, knee.high))
    return points


def _slope_interval(points: Sequence[KneePoint], residual_sd: float) -> tuple[float, float] | None:
    """The slope's 95% interval from the knees' intervals and the residual scatter (see the module's
    docstring); None when neither says anything (two knees without intervals fit any line exactly)."""
    if len(points) == 2 and any(p.low is None or p.high is None for p in points):
        return None  # two knees, one of them without an interval: nothing bounds the line's slope
    x = np.array([p.cpu_cores for p in points])
    weights = (x - x.mean()) / ((x - x.mean()) ** 2).sum()  # the slope is sum(weights * knee RPS)
    half_widths = np.array([(p.high - p.low) / 2 if p.low is not None and p.high is not None else 0.0 for p in points])
    from_knees = float(np.sqrt((weights**2 * half_widths**2).sum()))  # 95% half-widths combine as the z's cancel
    from_scatter = 0.0
    if len(points) > 2:
        dof = len(points) - 2
        from_scatter = (
            float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * residual_sd / float(np.sqrt(((x - x.mean()) ** 2).sum()))
        )
    half = math.hypot(from_knees, from_scatter)
    if half == 0:
        return None
    slope = float((weights * np.array([p.rps for p in points])).sum())
    return slope - half, slope + half


def fit_knees(points: Sequence[KneePoint]) -> Fit | None:
    """The least-squares line through the knees with its slope's interval; None when they sit at fewer
    than two CPU limits."""
    if len({p.cpu_cores for p in points}) < 2:
        return None
    x = np.array([p.cpu_cores for p in points])
    y = np.array([p.rps for p in points])
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    intercept = float(y.mean() - slope * x.mean())
    ss_res = float(((y - (slope * x + intercept)) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    residual_sd = math.sqrt(ss_res / (len(points) - 2)) if len(points) > 2 else 0.0
    ordered = tuple(sorted(points, key=lambda p: p.cpu_cores))
    return Fit(slope, intercept, r_squared, ordered, _slope_interval(ordered, residual_sd))


def require_fit(summary: RunSummary, profile: str | None = None) -> Fit:
    """The run's fit for a traffic profile (default: `sizing_profile`), or a UsageError saying why there is
    none and what to run instead."""
    measured = list(dict.fromkeys(c.profile.name for c in summary.configs))
    if profile is not None and profile not in measured:
        raise UsageError(
            f"run {summary.run_id} measured no traffic profile {profile!r}",
            f"use one it measured: {', '.join(measured) or 'none'}",
        )
    points = knee_points(summary, profile)
    if not points:
        configs = [c for c in summary.configs if c.profile.name == (profile or sizing_profile(summary))]
        why = "; ".join(f"{c.label}: {c.status}" + (f" ({c.reason})" if c.reason else "") for c in configs)
        raise UsageError(f"run {summary.run_id} has no valid knee ({why or 'no configuration'})", SWEEP_HINT)
    fit = fit_knees(points)
    if fit is None:
        at = ", ".join(fmt.cpu(c) for c in sorted({p.cpu_cores for p in points}))
        raise UsageError(
            f"run {summary.run_id} has valid knees at only one Envoy CPU limit ({at}); a fit needs two or more",
            SWEEP_HINT,
        )
    return fit


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


def recommend(
    fit: Fit, target_rps: float, headroom: float = DEFAULT_HEADROOM, *, memory_bytes: int | None = None
) -> Recommendation:
    """Cores and memory for `target_rps` with `headroom` (0.3: the knee 30% above the target); memory from
    the peak working set of the knee configurations, unless `memory_bytes` (sized by the memory model)."""
    check_request(target_rps, headroom)
    if fit.slope <= 0:
        raise UsageError(fit.caveats()[0])
    required = target_rps * (1 + headroom)
    exact = (required - fit.intercept) / fit.slope
    cores = round(_round_up(max(exact, CPU_STEP_CORES), CPU_STEP_CORES), 3)
    peak_memory = max(p.peak_memory_bytes for p in fit.points)
    memory = int(_round_up(peak_memory * (1 + headroom), MEMORY_STEP_BYTES)) if peak_memory > 0 else None
    warnings = list(fit.caveats())
    low, high = fit.cores_range
    if not low <= exact <= high:
        knee_low, knee_high = fit.rps_range
        warnings.append(
            f"extrapolated {fit.extrapolation(exact):.1f}x: {required:,.0f} RPS needs {exact:.2f} cores, outside "
            f"the measured {fmt.cpu(low)}-{fmt.cpu(high)} ({knee_low:,.0f}-{knee_high:,.0f} knee RPS); "
            f"confirm with a sweep whose Envoy CPU limits reach {format_cpu(cores)} CPU"
        )
    peak_rps = max(p.peak_rps for p in fit.points)
    if memory_bytes is not None:
        memory = memory_bytes
    elif memory is not None and required > peak_rps:
        warnings.append(
            f"memory measured up to {peak_rps:,.0f} RPS only; Envoy's working set grows with connections, "
            "so watch it at the target load"
        )
    return Recommendation(
        target_rps, headroom, required, exact, cores, memory, peak_memory, fit, tuple(warnings),
        fit.cores_for(required), memory_bytes is not None,
    )  # fmt: skip


def format_recommendation(rec: Recommendation, run_id: str) -> str:
    """What `gateway-sizer recommend` prints: the resources, how they were reached, and every warning."""
    if rec.memory_from_model:
        memory = f"{rec.memory:<7} (from the memory model: see below)"
    elif rec.memory_bytes is not None:
        memory = (
            f"{rec.memory:<7} (peak working set {fmt.mebibytes(rec.peak_memory_bytes)}, +{rec.headroom:.0%}, "
            f"rounded up to {format_memory(MEMORY_STEP_BYTES)})"
        )
    else:
        memory = "not measured in this run: keep the limit it ran with"
    knee = f"a knee at {rec.required_rps:,.0f} RPS"
    interval = rec.cores_interval
    spread = f"; {interval[0]:.2f}-{interval[1]:.2f} within the slope's 95% interval" if interval else ""
    lines = [
        f"Envoy for {rec.target_rps:,.0f} RPS with {rec.headroom:.0%} headroom ({knee}):",
        f"  cpu:     {rec.cpu:<7} ({rec.cores_exact:.3f} cores by the fit{spread}, rounded up to "
        f"{format_cpu(CPU_STEP_CORES)})",
        f"  memory:  {memory}",
    ]
    if rec.memory_bytes is not None:
        lines.append(f"  resources: requests = limits = {{cpu: {rec.cpu}, memory: {rec.memory}}}")
    lines.append(f"fit: {rec.fit.describe()}, run {run_id}")
    lines += [f"warning: {w}" for w in rec.warnings]
    return "\n".join(lines)


def example_targets(fit: Fit, count: int = 4) -> list[float]:
    """Round target RPS (1-2-5 series) from the smallest measured knee upwards, for the report's sizing table."""
    low = max(fit.rps_range[0], 1.0)
    exponent = math.floor(math.log10(low))
    targets: list[float] = []
    while len(targets) < count:
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exponent
            if value >= low and len(targets) < count:
                targets.append(value)
        exponent += 1
    return targets

"""Envoy's memory limit and overload-manager settings from the memory fits, pure.

For N held connections and R routes (runner.report.memory_fit: working set = a + b x connections +
c x routes):
- memory limit = the largest of: the fitted working set x (1 + headroom), the working set with both slopes
  at their 95% upper end, and the limit under which the connection cap below still admits N; rounded up
  to 64Mi;
- overload manager for a limit L (what `contour bootstrap --overload-downstream-max-conn` and
  `--overload-max-heap` configure): at most floor((L x CONNECTION_SHARE - working set at 0 connections and
  R routes - OPENING_RESERVE_BYTES) / b_upper) active downstream connections, so held connections cannot
  push the working set past
  CONNECTION_SHARE of the limit; and a heap limit of L x HEAP_SHARE less the largest working set measured
  outside Envoy's heap, at 95% of which Envoy shrinks its heap and at 98% stops accepting requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner.errors import UsageError
from runner.model import RunSummary
from runner.quantities import format_memory
from runner.report.memory_fit import KIB, MIB, MemoryFits, memory_fits
from runner.report.sizing import DEFAULT_HEADROOM, MEMORY_STEP_BYTES

__all__ = [
    "CONNECTION_SHARE",
    "HEAP_SHARE",
    "MAX_RECOMMEND_CONNECTIONS",
    "MAX_RECOMMEND_ROUTES",
    "MEMORY_HINT",
    "OPENING_RESERVE_BYTES",
    "MemoryRecommendation",
    "OverloadSettings",
    "check_memory_request",
    "format_memory_recommendation",
    "overload_for",
    "recommend_memory",
    "require_memory_fits",
]

CONNECTION_SHARE = 0.90  # held connections may fill the limit up to this share; the rest is for requests
# Kept free below that share for connections being opened: a client that opens them without bound keeps up to
# a few hundred first requests in flight (the holder 256) whose buffers the idle fit does not see. An allowance
# (256 x 64 KiB), not a measurement: without it the overload test's Envoy was OOM-killed in 1 of 2 runs at 128Mi.
OPENING_RESERVE_BYTES = 16 * MIB
HEAP_SHARE = 0.95  # Envoy's heap limit, with what lives outside the heap, stays within this share
HEAP_STEP_BYTES = MIB  # heap limits are rounded down to whole MiB
HEAP_STOP_SHARE = 0.98  # at this share of its heap limit Envoy stops accepting requests
MAX_RECOMMEND_CONNECTIONS = 100_000_000  # recommend --connections
MAX_RECOMMEND_ROUTES = 10_000_000  # recommend --routes
MEMORY_HINT = (
    "measure them with a memory sweep, e.g. gateway-sizer sweep --scenario memory "
    "(make sweep SCENARIO=memory CONNECTIONS=1000,5000,10000 ROUTES=0,500,1000)"
)


@dataclass(frozen=True)
class OverloadSettings:
    """Envoy overload-manager settings that keep it inside `limit_bytes`."""

    limit_bytes: int
    routes: int
    max_connections: int
    connection_bytes: float  # the cost per connection the cap assumes (the slope's 95% upper end)
    base_bytes: float  # the working set at 0 held connections and `routes` routes
    max_heap_bytes: int | None  # None: Envoy's heap was not measured, or the limit leaves no room
    non_heap_bytes: float | None

    def contour_flags(self) -> list[str]:
        flags = [f"--overload-downstream-max-conn={self.max_connections}"]
        if self.max_heap_bytes:
            flags.append(f"--overload-max-heap={self.max_heap_bytes}")
        return flags


@dataclass(frozen=True)
class MemoryRecommendation:
    """The memory limit for `connections` and `routes` with `headroom`, and the overload settings for it."""

    connections: int
    routes: int
    headroom: float
    predicted_bytes: float
    upper_bytes: float
    memory_bytes: int
    overload: OverloadSettings
    fits: MemoryFits
    warnings: tuple[str, ...]

    @property
    def memory(self) -> str:
        return format_memory(self.memory_bytes)


def _round_up(value: float, step: int) -> int:
    return math.ceil(round(value / step, 9)) * step


def check_memory_request(connections: float, routes: float) -> None:
    """UsageError for counts that mean nothing: negative, fractional, not finite, absurd."""
    for flag, value, high in (
        ("--connections", connections, MAX_RECOMMEND_CONNECTIONS),
        ("--routes", routes, MAX_RECOMMEND_ROUTES),
    ):
        if not math.isfinite(value) or value < 0 or value != int(value) or value > high:
            raise UsageError(f"{flag} must be a whole number from 0 to {high:,}, got {value:g}", f"e.g. {flag} 10000")


def require_memory_fits(summary: RunSummary, *, routes: bool) -> MemoryFits:
    """The run's memory fits, or a UsageError saying what is missing and what to run."""
    if summary.memory is None:
        raise UsageError(f"run {summary.run_id} has no memory model", MEMORY_HINT)
    fits = memory_fits(summary.memory)
    if fits.connections is None:
        raise UsageError(
            f"run {summary.run_id} has no connection fit (it needs two or more measured connection counts)", MEMORY_HINT
        )
    if routes and fits.routes is None:
        raise UsageError(
            f"run {summary.run_id} has no route fit (it needs two or more measured route counts)", MEMORY_HINT
        )
    return fits


def _connection_base(fits: MemoryFits, routes: int) -> float:
    """What the connection cap leaves out: the working set at 0 connections and `routes`, and the reserve for
    connections being opened."""
    return (fits.working_set(0, routes) or 0.0) + OPENING_RESERVE_BYTES


def overload_for(fits: MemoryFits, limit_bytes: int, routes: int = 0) -> OverloadSettings:
    """The overload settings that keep Envoy with `routes` routes inside `limit_bytes` (see the module)."""
    fit = fits.connections
    if fit is None:
        raise ValueError("no connection fit")
    base = _connection_base(fits, routes)
    per_connection = max(fit.slope, fit.slope_interval[1] if fit.slope_interval else fit.slope)
    cap = math.floor((limit_bytes * CONNECTION_SHARE - base) / per_connection) if per_connection > 0 else 0
    heap = None
    if fits.non_heap_bytes is not None:
        room = limit_bytes * HEAP_SHARE - fits.non_heap_bytes
        heap = int(room // HEAP_STEP_BYTES) * HEAP_STEP_BYTES if room >= HEAP_STEP_BYTES else None
    return OverloadSettings(limit_bytes, routes, max(cap, 0), per_connection, base, heap, fits.non_heap_bytes)


def recommend_memory(
    fits: MemoryFits, connections: int, routes: int = 0, headroom: float = DEFAULT_HEADROOM
) -> MemoryRecommendation:
    """The memory limit and overload settings for `connections` and `routes` (see the module)."""
    check_memory_request(connections, routes)
    predicted = fits.working_set(connections, routes)
    upper = fits.working_set(connections, routes, upper=True)
    if predicted is None or upper is None or fits.connections is None:
        raise UsageError("the run's memory fits do not cover this request", MEMORY_HINT)
    fit = fits.connections
    per_connection = max(fit.slope, fit.slope_interval[1] if fit.slope_interval else fit.slope)
    base = _connection_base(fits, routes)
    admits = (base + per_connection * connections) / CONNECTION_SHARE
    # The heap limit the overload manager gets (L x HEAP_SHARE - non-heap) must leave the heap that N
    # connections need below HEAP_STOP_SHARE of it; every point's heap was below its working set, so the
    # working set's upper end bounds that heap.
    heap_fits = (upper / HEAP_STOP_SHARE + (fits.non_heap_bytes or 0.0)) / HEAP_SHARE
    limit = _round_up(max(predicted * (1 + headroom), upper, admits, heap_fits), MEMORY_STEP_BYTES)
    return MemoryRecommendation(
        connections,
        routes,
        headroom,
        predicted,
        upper,
        limit,
        overload_for(fits, limit, routes),
        fits,
        tuple(_warnings(fits, connections, routes)),
    )


def _warnings(fits: MemoryFits, connections: int, routes: int) -> list[str]:
    notes = []
    fit = fits.connections
    if fit is not None and connections > fit.x_high * 1.05:
        notes.append(
            f"extrapolated: {connections:,} connections, measured up to {fit.x_high:,.0f}; confirm with "
            f"CONNECTIONS reaching {connections:,}"
        )
    if fits.routes is not None and routes > fits.routes.x_high * 1.05:
        notes.append(f"extrapolated: {routes:,} routes, measured up to {fits.routes.x_high:,.0f}")
    for name, line in (("connection", fits.connections), ("route", fits.routes)):
        if line is not None and line.slope_interval is None:
            notes.append(f"the {name} fit rests on two points (no interval): measure a third count")
    if fits.cgroup_version == 1:
        notes.append(
            "measured on cgroup v1, which does not charge socket buffers to the memory cgroup; on cgroup v2 "
            "(most current clusters) idle connections' kernel buffers count too: confirm on the cluster"
        )
    if fits.non_heap_bytes is None:
        notes.append("Envoy's heap was not measured: no heap limit (server.memory_heap_size not scraped)")
    return notes


def _mib(value: float) -> str:
    return f"{value / MIB:,.1f} MiB"


def format_overload(overload: OverloadSettings) -> list[str]:
    """The overload settings as `recommend` prints them."""
    lines = [
        f"overload manager (keeps Envoy inside {format_memory(overload.limit_bytes)}):",
        f"  max active downstream connections: {overload.max_connections:,} ({CONNECTION_SHARE:.0%} of the limit "
        f"less {_mib(overload.base_bytes)} at 0 connections and {overload.routes:,} routes with 16 MiB kept for "
        "connections being opened, at "
        f"{overload.connection_bytes / KIB:,.1f} KiB each, the slope's 95% upper end)",
    ]
    if overload.max_heap_bytes is not None and overload.non_heap_bytes is not None:
        lines.append(
            f"  max heap: {overload.max_heap_bytes:,} bytes ({format_memory(overload.max_heap_bytes)}; "
            f"{HEAP_SHARE:.0%} of the limit less {_mib(overload.non_heap_bytes)} measured outside the heap): "
            "shrink the heap at 95% of it, stop accepting requests at 98%"
        )
    else:
        lines.append("  max heap: none (Envoy's heap was not measured, or the limit leaves no room for it)")
    lines.append(
        f"  Contour: contour bootstrap ... {' '.join(overload.contour_flags())} (the envoy-initconfig init "
        "container's args; a rollout applies them)"
    )
    lines.append(
        "  local platform: envoy: {overload: {max_connections: "
        + f"{overload.max_connections}"
        + (f", max_heap: {overload.max_heap_bytes}" if overload.max_heap_bytes else "")
        + "}}"
    )
    return lines


def format_memory_recommendation(rec: MemoryRecommendation, run_id: str) -> list[str]:
    """What `recommend --connections N --routes R` prints about memory."""
    fits = rec.fits
    lines = [
        f"Envoy memory for {rec.connections:,} held connections and {rec.routes:,} routes with "
        f"{rec.headroom:.0%} headroom:",
        f"  memory:  {rec.memory:<7} (working set {_mib(rec.predicted_bytes)} by the fits, "
        f"{_mib(rec.upper_bytes)} at their 95% upper end; +{rec.headroom:.0%} and room for the "
        "connection cap and the heap limit, "
        f"rounded up to {format_memory(MEMORY_STEP_BYTES)})",
        f"  fits:    {fits.describe_connections()}; {fits.describe_routes()}; {fits.cgroup_note}",
        *format_overload(rec.overload),
        f"memory fits: run {run_id}",
    ]
    return lines + [f"warning: {w}" for w in rec.warnings]

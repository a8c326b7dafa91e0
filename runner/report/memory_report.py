"""The report's memory section, pure: the memory model's points, fits, overload settings and examples.

Built once from a run's `MemoryResult`; the renderers (templates memory.md.j2 and memory.html.j2, and the
two memory plots) lay it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.model import MemoryPoint, MemoryResult, percentile
from runner.report.memory_fit import MemoryFits, memory_fits
from runner.report.memory_sizing import (
    MemoryRecommendation,
    OverloadSettings,
    overload_for,
    recommend_memory,
)
from runner.report.sizing import DEFAULT_HEADROOM

__all__ = ["MemoryRow", "MemorySection", "build_memory_section"]

EXAMPLE_CONNECTIONS = (1_000, 5_000, 10_000, 20_000, 50_000, 100_000)
MAX_EXAMPLES = 4


@dataclass(frozen=True)
class MemoryRow:
    """A point as the tables show it."""

    point: MemoryPoint
    utilization: float | None  # Envoy's CPU over its limit

    @property
    def working_set_mib(self) -> float | None:
        return self.point.working_set_bytes / 2**20 if self.point.working_set_bytes is not None else None


@dataclass(frozen=True)
class MemorySection:
    """Everything the report shows about memory."""

    envoy_cpu_cores: float
    envoy_memory: str
    concurrency: int
    rps: float
    refresh_s: float
    hold_s: float
    fits: MemoryFits
    rows: tuple[MemoryRow, ...]
    failed: tuple[MemoryPoint, ...]
    overload: OverloadSettings | None  # at the limit the points ran under, no extra route
    examples: tuple[MemoryRecommendation, ...]
    headroom: float

    @property
    def connection_rows(self) -> tuple[MemoryRow, ...]:
        return tuple(r for r in self.rows if r.point.routes == 0)

    @property
    def route_rows(self) -> tuple[MemoryRow, ...]:
        return tuple(r for r in self.rows if r.point.connections == 0)

    @property
    def control_plane_rows(self) -> tuple[MemoryRow, ...]:
        """The route points with the control plane's figures or a timed route programming (kubernetes)."""
        return tuple(
            r
            for r in self.route_costs
            if r.point.programming is not None
            or r.point.contour_working_set_bytes is not None
            or r.point.contour_cpu_cores is not None
        )

    @property
    def programming_text(self) -> str | None:
        """ "p50 0.16 s, p99 0.23 s from an HTTPProxy's creation to Envoy serving its fqdn, over 50 routes
        created one at a time (with up to 1,000 routes in place; ...)" over every point's timed routes"""
        timed = [(r.point.routes, r.point.programming) for r in self.control_plane_rows if r.point.programming]
        samples = [s for _, p in timed if p for s in p.samples_s]
        if not samples:
            return None
        p50, p99 = percentile(samples, 50), percentile(samples, 99)
        top = max(routes for routes, _ in timed)
        few = "; p99 of fewer than 100 routes is near their slowest" if len(samples) < 100 else ""
        return (
            f"p50 {p50:.2f} s, p99 {p99:.2f} s from an HTTPProxy's creation to Envoy serving its fqdn, over "
            f"{len(samples)} routes created one at a time (with up to {top:,} routes in place{few})"
        )

    @property
    def route_costs(self) -> tuple[MemoryRow, ...]:
        """The points without held connections, by routes: Envoy's CPU per request with many routes."""
        return tuple(sorted((r for r in self.rows if r.point.connections == 0), key=lambda r: r.point.routes))

    @property
    def route_cost_text(self) -> str | None:
        """ "Envoy's CPU per request: 250 µs at 0 routes, 262 µs at 2,000 routes (at 200 RPS)" """
        costs = [(r.point.routes, r.point.cpu_per_request_us, r.point.envoy_rps) for r in self.route_costs]
        costs = [(routes, cost, rps) for routes, cost, rps in costs if cost is not None]
        if len(costs) < 2:
            return None
        parts = ", ".join(f"{cost:,.0f} \u00b5s at {routes:,} routes" for routes, cost, _ in costs)
        rates = [rps or 0 for _, _, rps in costs]
        return f"Envoy's CPU per request: {parts} (at {min(rates):,.0f}-{max(rates):,.0f} RPS through Envoy)"


def _targets(fits: MemoryFits) -> list[int]:
    """Round connection counts from the largest measured one's order of magnitude, for the examples."""
    if fits.connections is None:
        return []
    low = max(fits.connections.x_high / 20, 1)
    return [c for c in EXAMPLE_CONNECTIONS if c >= low][:MAX_EXAMPLES]


def build_memory_section(result: MemoryResult | None, headroom: float = DEFAULT_HEADROOM) -> MemorySection | None:
    """The memory section of a run's report; None when the run measured no memory point."""
    if result is None or not any(p.measured for p in result.points):
        return None
    fits = memory_fits(result)
    rows = tuple(
        MemoryRow(p, p.envoy_cpu_cores / result.envoy_cpu_cores if p.envoy_cpu_cores is not None else None)
        for p in sorted(fits.points, key=lambda p: (p.routes > 0, p.connections, p.routes))
    )
    overload = overload_for(fits, result.envoy_memory_bytes) if fits.connections else None
    top_routes = int(fits.routes.x_high) if fits.routes else 0
    examples = tuple(
        recommend_memory(fits, connections, routes, headroom)
        for connections in _targets(fits)
        for routes in dict.fromkeys((0, top_routes))
    )
    return MemorySection(
        envoy_cpu_cores=result.envoy_cpu_cores,
        envoy_memory=result.envoy_memory,
        concurrency=result.concurrency,
        rps=result.rps,
        refresh_s=result.refresh_s,
        hold_s=result.hold_s,
        fits=fits,
        rows=rows,
        failed=tuple(p for p in result.points if not p.measured),
        overload=overload,
        examples=examples,
        headroom=headroom,
    )

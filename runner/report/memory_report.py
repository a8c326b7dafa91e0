"""The report's memory section, pure: the memory model's points, fits, overload settings and examples.

Built once from a run's `MemoryResult`; its tables are one column list each (runner.report.tables), laid out by
the templates memory.md.j2 and memory.html.j2, and the memory plots read its rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.model import MemoryPoint, MemoryResult, RouteProgramming, percentile
from runner.report import formatting as fmt
from runner.report.memory_fit import MemoryFits, memory_fits
from runner.report.memory_sizing import (
    MemoryRecommendation,
    OverloadSettings,
    overload_for,
    recommend_memory,
)
from runner.report.sizing import DEFAULT_HEADROOM
from runner.report.tables import Cell, Column, Table, table

__all__ = ["MemoryRow", "MemorySection", "build_memory_section", "contour_table", "example_table", "point_table"]

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


def _count(value: int) -> str:
    return f"{value:,}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} s"


def _bulk(point: MemoryPoint) -> str:
    """ "900, 3.10 s, 4.20 s": routes created in bulk, until the last was served, until their statuses."""
    timing = point.programming
    if timing is None or not timing.bulk:
        return "-"
    return f"{timing.bulk:,}, {_seconds(timing.bulk_s)}, {_seconds(timing.bulk_status_s)}"


def example_table(section: MemorySection) -> Table:
    columns: list[Column[MemoryRecommendation]] = [
        Column("Held connections", lambda e: _count(e.connections)),
        Column("Routes", lambda e: _count(e.routes)),
        Column("Working set by the fits", lambda e: fmt.mebibytes(e.predicted_bytes)),
        Column(f"Memory limit (+{section.headroom:.0%})", lambda e: Cell(e.memory, strong=True)),
        Column("Max connections", lambda e: _count(e.overload.max_connections)),
        Column("Max heap", lambda e: fmt.mebibytes(e.overload.max_heap_bytes)),
    ]
    return table("memory-examples", columns, section.examples)


def point_table(section: MemorySection) -> Table:
    columns: list[Column[MemoryRow]] = [
        Column("Held connections", lambda r: _count(r.point.held)),
        Column("Envoy active connections", lambda r: fmt.rps(r.point.envoy_connections)),
        Column("Extra routes", lambda r: _count(r.point.routes)),
        Column("Working set", lambda r: Cell(fmt.mebibytes(r.point.working_set_bytes), strong=True)),
        Column("Max", lambda r: fmt.mebibytes(r.point.working_set_max_bytes)),
        Column("Heap", lambda r: fmt.mebibytes(r.point.heap_bytes)),
        Column("Allocated", lambda r: fmt.mebibytes(r.point.allocated_bytes)),
        Column("Envoy CPU", lambda r: fmt.percent(r.utilization)),
        Column("Envoy RPS", lambda r: fmt.rps(r.point.envoy_rps)),
        Column("Locust RPS", lambda r: fmt.rps(r.point.rps)),
        Column("CPU per request", lambda r: fmt.microseconds(r.point.cpu_per_request_us)),
    ]
    return table("memory-points", columns, section.rows)


def contour_table(section: MemorySection) -> Table:
    def timing(row: MemoryRow) -> RouteProgramming | None:
        return row.point.programming

    columns: list[Column[MemoryRow]] = [
        Column("Routes", lambda r: _count(r.point.routes)),
        Column("Contour CPU", lambda r: fmt.millicores(r.point.contour_cpu_cores)),
        Column("Contour working set", lambda r: fmt.mebibytes(r.point.contour_working_set_bytes)),
        Column("Routes added", lambda r: _count(t.created) if (t := timing(r)) else "-"),
        Column("Bulk: routes, last served, statuses written", lambda r: _bulk(r.point)),
        Column("Timed routes", lambda r: str(len(t.samples_s)) if (t := timing(r)) else "-"),
        Column("p50", lambda r: Cell(_seconds(t.p50_s) if (t := timing(r)) else "-", strong=True)),
        Column("p99", lambda r: Cell(_seconds(t.p99_s) if (t := timing(r)) else "-", strong=True)),
        Column("Contour CPU while programming", lambda r: fmt.millicores(r.point.programming_contour_cpu_cores)),
    ]
    return table("contour-routes", columns, section.control_plane_rows)

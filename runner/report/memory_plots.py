"""The memory model's plots: Envoy's working set against held connections and against routes, with their fitted
lines, and how long each route took to be served (runner.report.memory_report's section)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.axes import Axes

from runner.model import MemoryPoint
from runner.report.drawing import COLORS, MIB, PERCENTILE_STYLES, Plot, png
from runner.report.memory_fit import LineFit
from runner.report.memory_report import MemoryRow
from runner.report.model import Report

__all__ = ["MEMORY_PLOTS"]


@dataclass(frozen=True)
class _MemoryAxis:
    """One of the memory model's two plots: its rows, x, fit and words."""

    name: str
    title: str
    rows: tuple[MemoryRow, ...]
    x_of: Callable[[MemoryPoint], float]
    x_label: str
    fit: LineFit | None
    slope: Callable[[LineFit], str]
    caption: str


def _memory_plot(report: Report, axis: _MemoryAxis) -> Plot | None:
    """Working set (and Envoy's heap) against the axis' x, with the fitted line."""
    section = report.memory
    if section is None:
        return None
    points = [r.point for r in axis.rows if r.point.working_set_bytes is not None]
    if len(points) < 2:
        return None
    fit = axis.fit

    def draw(ax: Axes) -> None:
        xs = [axis.x_of(p) for p in points]
        ax.plot(
            xs,
            [(p.working_set_bytes or 0) / MIB for p in points],
            "o",
            ms=7,
            color=COLORS[0],
            zorder=3,
            label="working set (mean over the window)",
        )
        heap = [(x, p.heap_bytes / MIB) for x, p in zip(xs, points, strict=True) if p.heap_bytes is not None]
        if heap:
            ax.plot(*zip(*heap, strict=True), "s", ms=5, color=COLORS[2], label="Envoy heap (server.memory_heap_size)")
        if fit is not None:
            ends = [0.0, max(xs) * 1.05]
            ax.plot(
                ends,
                [fit.at(x) / MIB for x in ends],
                "--",
                color=COLORS[1],
                label=f"fit: {axis.slope(fit)}, R\u00b2 {fit.r_squared:.3f}",
            )
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(axis.x_label)
        ax.set_ylabel("MiB")
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    caption = f"{axis.caption}; Envoy at {section.envoy_memory}, {section.fits.cgroup_note.split(':')[0]}."
    return Plot(axis.name, axis.title, caption, png(draw))


def _memory_vs_connections(report: Report) -> Plot | None:
    section = report.memory
    if section is None:
        return None
    axis = _MemoryAxis(
        "memory_vs_connections",
        "Envoy memory vs held connections",
        section.connection_rows,
        lambda p: p.envoy_connections if p.envoy_connections is not None else float(p.held),
        "Envoy's active downstream connections",
        section.fits.connections,
        lambda fit: f"{fit.slope / 2**10:,.1f} KiB per connection",
        section.fits.describe_connections(),
    )
    return _memory_plot(report, axis)


def _memory_vs_routes(report: Report) -> Plot | None:
    section = report.memory
    if section is None:
        return None
    axis = _MemoryAxis(
        "memory_vs_routes",
        "Envoy memory vs routes",
        section.route_rows,
        lambda p: float(p.routes),
        "extra routes (virtual hosts, or HTTPProxies on Kubernetes)",
        section.fits.routes,
        lambda fit: f"{fit.slope * 1000 / MIB:,.2f} MiB per 1,000 routes",
        section.fits.describe_routes(),
    )
    return _memory_plot(report, axis)


def _route_programming(report: Report) -> Plot | None:
    """Each timed route's seconds from creation to served, against the routes in place; p50 and p99 per point."""
    section = report.memory
    if section is None or section.programming_text is None:
        return None
    timed = [(r.point.routes, r.point.programming) for r in section.control_plane_rows]
    timed_points = [(routes, g) for routes, g in timed if g is not None and g.samples_s]

    def draw(ax: Axes) -> None:
        for index, (routes, g) in enumerate(timed_points):
            ax.plot(
                [routes] * len(g.samples_s),
                g.samples_s,
                "o",
                ms=4,
                alpha=0.45,
                color=COLORS[0],
                label="one route" if index == 0 else None,
            )
        xs = [routes for routes, _ in timed_points]
        for name, color in (("p50", COLORS[2]), ("p99", COLORS[1])):
            ys = [g.percentile_s(int(name[1:])) or 0.0 for _, g in timed_points]
            ax.plot(xs, ys, color=color, label=name, **PERCENTILE_STYLES[name])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("routes (HTTPProxies) in place")
        ax.set_ylabel("seconds from creation to served")
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    caption = f"Route programming: {section.programming_text}."
    return Plot("memory_route_programming", "Route programming latency vs routes", caption, png(draw))


MEMORY_PLOTS = (_memory_vs_connections, _memory_vs_routes, _route_programming)  # in reading order

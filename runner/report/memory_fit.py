"""The memory model's fits, pure: Envoy's working set as a line in held connections and in routes.

working set = a + b x connections (the connection points, no extra route) and
working set = a' + c x routes (the route points, no held connection), and Contour's working set against
routes where the platform has Contour. Each line comes from
scipy.stats.linregress, with its slope's 95% interval (Student's t over the slope's standard error,
n - 2 degrees of freedom; none from two points, which fit any line exactly) and R². The x of a
connection point is Envoy's own count of active downstream connections over the window (the held ones
and the light load's), so a connection the holder thought open but Envoy had closed does not count.

The cgroup version goes with the fits: cgroup v1 does not charge socket buffers to the memory cgroup
(only `memory.kmem.tcp`, unlimited unless set), cgroup v2 does (`memory.stat: sock`), so the same Envoy
shows a larger cost per connection on v2 when its sockets hold data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runner.model import MemoryPoint, MemoryResult

__all__ = ["CGROUP_NOTES", "CONFIDENCE", "LineFit", "MemoryFits", "fit_line", "memory_fits"]

CONFIDENCE = 0.95
KIB, MIB = 2**10, 2**20
CGROUP_NOTES = {
    1: "cgroup v1: socket buffers are not charged to the memory cgroup (only to memory.kmem.tcp), so this "
    "cost per connection leaves out the kernel's buffers; on cgroup v2 (most current clusters) they count",
    2: "cgroup v2: socket buffers are charged to the memory cgroup (memory.stat sock), so this cost per "
    "connection includes the kernel's buffers of idle connections",
}


@dataclass(frozen=True)
class LineFit:
    """y = slope x x + intercept by least squares over `n` points, x from `x_low` to `x_high`."""

    slope: float
    intercept: float
    r_squared: float
    n: int
    x_low: float
    x_high: float
    slope_interval: tuple[float, float] | None  # 95%; None from two points

    def at(self, x: float) -> float:
        return self.slope * x + self.intercept

    def upper_at(self, x: float) -> float:
        """y at `x` with the slope at its interval's upper end (pivoting on the intercept)."""
        slope = self.slope_interval[1] if self.slope_interval else self.slope
        return max(slope, self.slope) * x + self.intercept


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """The least-squares line through (xs, ys); None with fewer than two distinct x."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(x) < 2 or len(set(x.tolist())) < 2:
        return None
    fit = stats.linregress(x, y)
    interval = None
    if len(x) > 2 and math.isfinite(fit.stderr):
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(x) - 2)) * float(fit.stderr)
        interval = (float(fit.slope) - half, float(fit.slope) + half)
    r_squared = float(fit.rvalue) ** 2 if math.isfinite(fit.rvalue) else 1.0
    return LineFit(float(fit.slope), float(fit.intercept), r_squared, len(x), float(x.min()), float(x.max()), interval)


@dataclass(frozen=True)
class MemoryFits:
    """The run's memory fits and what they rest on."""

    connections: LineFit | None  # working set (bytes) against Envoy's active connections
    routes: LineFit | None  # working set (bytes) against extra routes
    heap_connections: LineFit | None  # Envoy's heap (bytes) against active connections
    contour_routes: LineFit | None  # Contour's working set (bytes) against routes (kubernetes)
    cgroup_version: int | None
    memory_limit_bytes: int  # the limit the points ran under
    non_heap_bytes: float | None  # the largest working set not in Envoy's heap, over the points
    points: tuple[MemoryPoint, ...]

    @property
    def kib_per_connection(self) -> float | None:
        return self.connections.slope / KIB if self.connections else None

    @property
    def mib_per_1000_routes(self) -> float | None:
        return self.routes.slope * 1000 / MIB if self.routes else None

    @property
    def cgroup_note(self) -> str:
        return CGROUP_NOTES.get(self.cgroup_version or 0, "cgroup version not recorded")

    def working_set(self, connections: float, routes: float, *, upper: bool = False) -> float | None:
        """The working set predicted for `connections` held and `routes` extra routes: the connection line
        (measured without extra routes) plus the routes' slope; `upper` takes each slope's 95% upper end.
        None without a connection fit, or with routes but no route fit."""
        if self.connections is None or (routes and self.routes is None):
            return None
        base = self.connections.upper_at(connections) if upper else self.connections.at(connections)
        if not routes or self.routes is None:
            return base
        slope = self.routes.slope
        if upper and self.routes.slope_interval:
            slope = max(slope, self.routes.slope_interval[1])
        return base + slope * routes

    def describe_connections(self) -> str:
        """ "43.1 KiB per connection (95% CI 41.0-45.2, R^2 0.998, 5 points up to 20,000)" """
        fit = self.connections
        if fit is None:
            return "no fit: measure two or more connection counts"
        return f"{fit.slope / KIB:,.1f} KiB per connection ({_interval(fit, KIB)}R^2 {fit.r_squared:.3f}, " + (
            f"{fit.n} points up to {fit.x_high:,.0f} connections)"
        )

    def describe_routes(self) -> str:
        """ "1.9 MiB per 1,000 routes (95% CI 1.8-2.0, R^2 0.999, 4 points up to 1,000)" """
        return _per_1000_routes(self.routes)

    def describe_contour_routes(self) -> str | None:
        """Contour's working set per 1,000 routes, like describe_routes; None where no point measured it."""
        if not any(p.contour_working_set_bytes is not None for p in self.points):
            return None
        return _per_1000_routes(self.contour_routes)


def _per_1000_routes(fit: LineFit | None) -> str:
    if fit is None:
        return "no fit: measure two or more route counts"
    per = MIB / 1000
    return f"{fit.slope / per:,.2f} MiB per 1,000 routes ({_interval(fit, per)}R^2 {fit.r_squared:.3f}, " + (
        f"{fit.n} points up to {fit.x_high:,.0f} routes)"
    )


def _interval(fit: LineFit, unit: float) -> str:
    if fit.slope_interval is None:
        return "no interval from 2 points, "
    low, high = fit.slope_interval
    return f"95% CI {low / unit:,.2f}-{high / unit:,.2f}, "


def _x_connections(point: MemoryPoint) -> float:
    """Envoy's count of active connections, or the holder's when Envoy's was not scraped."""
    return point.envoy_connections if point.envoy_connections is not None else float(point.held)


def memory_fits(result: MemoryResult) -> MemoryFits:
    """Fit the measured points of a run's memory result."""
    measured = [p for p in result.points if p.measured and p.working_set_bytes is not None]
    by_connections = [p for p in measured if p.routes == 0]
    by_routes = [p for p in measured if p.connections == 0]
    heap = [p for p in by_connections if p.heap_bytes is not None]
    contour = [p for p in by_routes if p.contour_working_set_bytes is not None]
    non_heap = [
        p.working_set_bytes - p.heap_bytes for p in measured if p.heap_bytes is not None and p.working_set_bytes
    ]
    return MemoryFits(
        connections=fit_line(
            [_x_connections(p) for p in by_connections], [p.working_set_bytes or 0.0 for p in by_connections]
        ),
        routes=fit_line([p.routes for p in by_routes], [p.working_set_bytes or 0.0 for p in by_routes]),
        heap_connections=fit_line([_x_connections(p) for p in heap], [p.heap_bytes or 0.0 for p in heap]),
        contour_routes=fit_line([p.routes for p in contour], [p.contour_working_set_bytes or 0.0 for p in contour]),
        cgroup_version=result.cgroup_version,
        memory_limit_bytes=result.envoy_memory_bytes,
        non_heap_bytes=max(non_heap) if non_heap else None,
        points=tuple(measured),
    )

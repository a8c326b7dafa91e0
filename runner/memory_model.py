"""The memory model's measurement types: one point (idle connections held and routes added, and what Envoy used
for them), how long the routes a point added took to be served, and the experiment's result.

Saved in summary.json under `memory` (runner.model.RunSummary), and read back from runner.model as before
(`from runner.model import MemoryPoint`). Pure data, like runner.model.
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import Field

from runner.records import Frozen, Mutable


def percentile(samples: list[float], percent: float) -> float | None:
    """The samples' `percent` percentile, linear between order statistics (numpy's default); None without
    samples."""
    if len(samples) < 2:
        return samples[0] if samples else None
    return statistics.quantiles(samples, n=100, method="inclusive")[round(percent) - 1]


class RouteProgramming(Frozen):
    """How long a platform that programs routes at runtime (Contour) took to serve a point's new routes.

    The first `bulk` routes were created one after another without waiting; `bulk_s` runs from the first
    create to the first 2xx of the last of them through the gateway, `bulk_status_s` to the last of their
    statuses written by the control plane. The others were created one at a time after that, each timed
    from its create call to its first 2xx (`samples_s`, polled every 10 ms): their percentiles are the
    route programming latency. Wall-clock times bound the whole.
    """

    created: int
    bulk: int = 0
    bulk_s: float | None = None
    bulk_status_s: float | None = None
    samples_s: list[float] = []
    started_at: float
    ended_at: float

    def percentile_s(self, percent: float) -> float | None:
        return percentile(self.samples_s, percent)

    @property
    def p50_s(self) -> float | None:
        return self.percentile_s(50)

    @property
    def p99_s(self) -> float | None:
        return self.percentile_s(99)


class MemoryPoint(Frozen):
    """One point of the memory model: `connections` idle keep-alive connections held through Envoy and
    `routes` extra virtual hosts in its configuration, under a light load, measured over one window.

    `held` and the holder's counts come from the Locust master's connection holder at the window's end;
    `envoy_connections` is Envoy's own count of active downstream connections (mean over the window: the
    held ones plus the light load's). The working set is cAdvisor's (the exporter's, locally): mean and
    max over the window. `heap_bytes` and `allocated_bytes` are Envoy's `server.memory_heap_size` and
    `server.memory_allocated`. CPU, Envoy RPS and Locust RPS are those of the light load plus the held
    connections' refreshes (`refresh_rps` of them). A `failed` point has a reason and maybe no figures.
    Where the platform has a control plane (Contour), its CPU and working set over the same window, and
    how long the routes the point added took to be served (`programming`, with Contour's CPU meanwhile).
    """

    key: str
    connections: int
    routes: int
    status: Literal["measured", "failed"] = "measured"
    reason: str | None = None
    held: int = 0
    opened: int = 0
    open_failures: int = 0
    closed_by_peer: int = 0
    envoy_connections: float | None = None
    working_set_bytes: float | None = None
    working_set_max_bytes: float | None = None
    heap_bytes: float | None = None
    allocated_bytes: float | None = None
    envoy_cpu_cores: float | None = None
    envoy_rps: float | None = None
    rps: float | None = None
    refresh_rps: float = 0.0
    started_at: float | None = None
    window_s: float | None = None
    contour_cpu_cores: float | None = None
    contour_working_set_bytes: float | None = None
    programming: RouteProgramming | None = None
    programming_contour_cpu_cores: float | None = None  # Contour's mean CPU while the new routes were programmed

    @property
    def measured(self) -> bool:
        return self.status == "measured"

    @property
    def cpu_per_request_us(self) -> float | None:
        """Envoy CPU time per request it served in the window, in microseconds."""
        if self.envoy_cpu_cores is None or not self.envoy_rps:
            return None
        return self.envoy_cpu_cores / self.envoy_rps * 1e6


class MemoryResult(Mutable):
    """The memory model's points and how they were measured: Envoy's limits, the light load, the cgroup
    version (on v1 socket buffers are not charged to the memory cgroup, on v2 they are)."""

    envoy_cpu_cores: float = Field(alias="envoy_cpu")
    envoy_memory: str
    envoy_memory_bytes: int
    concurrency: int
    cgroup_version: int | None = None
    rps: float = 0.0
    refresh_s: float = 0.0
    hold_s: float = 0.0
    accept_encoding: str | None = None  # what the light load's clients sent (None: runs before it was recorded)
    points: list[MemoryPoint] = []

    def point(self, key: str) -> MemoryPoint | None:
        return next((p for p in self.points if p.key == key), None)

    def record(self, point: MemoryPoint) -> None:
        """Add `point`, replacing an earlier attempt at the same key."""
        self.points = [*(p for p in self.points if p.key != point.key), point]

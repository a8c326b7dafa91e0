"""The memory model's fits and what `recommend --connections/--routes` derives from them: pure functions on
points made up here (known slopes), so each figure can be checked against the truth."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from runner.errors import UsageError
from runner.model import MemoryPoint, MemoryResult, RunSummary
from runner.report.memory_fit import KIB, MIB, fit_line, memory_fits
from runner.report.memory_report import build_memory_section
from runner.report.memory_sizing import (
    CONNECTION_SHARE,
    HEAP_SHARE,
    OPENING_RESERVE_BYTES,
    check_memory_request,
    format_memory_recommendation,
    overload_for,
    recommend_memory,
    require_memory_fits,
)
from runner.report.sizing import MEMORY_STEP_BYTES

BASE_BYTES = 40 * MIB
PER_CONNECTION = 43 * KIB
PER_ROUTE = 2 * KIB
NON_HEAP = 18 * MIB


def point(connections: int = 0, routes: int = 0, noise: float = 0.0, **extra: object) -> MemoryPoint:
    working_set = BASE_BYTES + PER_CONNECTION * connections + PER_ROUTE * routes + noise
    fields = {
        "key": f"connections={connections},routes={routes}",
        "connections": connections,
        "routes": routes,
        "held": connections,
        "envoy_connections": connections + 4.0,  # the light load's own connections
        "working_set_bytes": working_set,
        "working_set_max_bytes": working_set,
        "heap_bytes": working_set - NON_HEAP,
        "allocated_bytes": working_set - NON_HEAP - 5 * MIB,
        "envoy_cpu_cores": 0.02,
        "envoy_rps": 50.0,
        "rps": 50.0,
        **extra,
    }
    return MemoryPoint.model_validate(fields)


def result(points: list[MemoryPoint], cgroup_version: int = 1, limit: int = 2**31) -> MemoryResult:
    return MemoryResult(envoy_cpu=0.5, envoy_memory="2Gi", envoy_memory_bytes=limit, concurrency=1,
                        cgroup_version=cgroup_version, rps=50, refresh_s=25, hold_s=30, points=points)  # fmt: skip


def summary(memory: MemoryResult | None) -> RunSummary:
    return RunSummary(run_id="r", platform="local", scenario="memory", threshold=0.9, started_at="2026-11-24T00:00:00",
                      memory=memory)  # fmt: skip


EXACT = [point(c) for c in (0, 1000, 5000, 10000)] + [point(0, r) for r in (250, 500, 1000)]


def test_a_line_through_exact_points_is_found_with_r_squared_one_and_a_tight_interval():
    fit = fit_line([0, 1, 2, 3], [1.0, 3.0, 5.0, 7.0])
    assert fit is not None and math.isclose(fit.slope, 2.0) and math.isclose(fit.intercept, 1.0)
    assert math.isclose(fit.r_squared, 1.0) and fit.slope_interval is not None
    assert fit.slope_interval[1] - fit.slope_interval[0] < 1e-9


def test_two_points_fit_without_an_interval_and_one_x_does_not_fit():
    two = fit_line([0, 10], [5.0, 25.0])
    assert two is not None and two.slope_interval is None and math.isclose(two.slope, 2.0)
    assert fit_line([5, 5, 5], [1.0, 2.0, 3.0]) is None
    assert fit_line([1], [1.0]) is None


def test_the_slopes_interval_covers_the_true_slope_about_95_percent_of_the_time():
    rng = np.random.default_rng(13)
    x = np.array([0, 2500, 5000, 10000, 15000, 20000], dtype=float)
    covered = 0
    for _ in range(400):
        fit = fit_line(x, BASE_BYTES + PER_CONNECTION * x + rng.normal(0, 4 * MIB, len(x)))
        assert fit is not None and fit.slope_interval is not None
        covered += fit.slope_interval[0] <= PER_CONNECTION <= fit.slope_interval[1]
    assert 0.90 <= covered / 400 <= 0.99, covered


def test_memory_fits_use_envoys_connection_count_and_keep_the_two_sweeps_apart():
    failed = MemoryPoint(key="connections=20000,routes=0", connections=20000, routes=0, status="failed", reason="x")
    fits = memory_fits(result([*EXACT, failed]))
    assert fits.connections is not None and fits.routes is not None
    assert fits.connections.n == 4 and fits.routes.n == 4  # the (0, 0) point serves both; the failed one neither
    assert math.isclose(fits.kib_per_connection or 0, 43.0)
    assert math.isclose(fits.mib_per_1000_routes or 0, PER_ROUTE * 1000 / MIB)
    assert fits.connections.x_high == 10004.0  # Envoy's count: held plus the light load's
    assert math.isclose(fits.non_heap_bytes or 0, NON_HEAP)
    assert "cgroup v1" in fits.cgroup_note and "not charged" in fits.cgroup_note
    assert "cgroup v2" in memory_fits(result(EXACT, cgroup_version=2)).cgroup_note


def test_recommended_limit_has_headroom_is_rounded_and_its_overload_cap_admits_the_connections():
    fits = memory_fits(result(EXACT))
    rec = recommend_memory(fits, 20000, 1000, headroom=0.3)
    truth = BASE_BYTES + PER_CONNECTION * 20000 + PER_ROUTE * 1000
    assert math.isclose(rec.predicted_bytes, truth - PER_CONNECTION * 4, rel_tol=1e-6)  # fit's x is Envoy's count
    overload = rec.overload
    admits = (overload.base_bytes + overload.connection_bytes * 20000) / CONNECTION_SHARE
    heap_fits = (rec.upper_bytes / 0.98 + NON_HEAP) / HEAP_SHARE  # the heap N needs stays under 98% of its limit
    needed = max(rec.predicted_bytes * 1.3, rec.upper_bytes, admits, heap_fits)
    assert rec.memory_bytes % MEMORY_STEP_BYTES == 0 and needed <= rec.memory_bytes < needed + MEMORY_STEP_BYTES
    assert overload.max_connections >= 20000
    filled = overload.base_bytes + overload.connection_bytes * overload.max_connections
    assert filled <= rec.memory_bytes * CONNECTION_SHARE < filled + overload.connection_bytes
    assert overload.max_heap_bytes is not None and overload.max_heap_bytes % MIB == 0
    heap_room = overload.max_heap_bytes + NON_HEAP
    assert heap_room <= rec.memory_bytes * HEAP_SHARE < heap_room + MIB
    assert overload.contour_flags() == [
        f"--overload-downstream-max-conn={overload.max_connections}",
        f"--overload-max-heap={overload.max_heap_bytes}",
    ]
    text = "\n".join(format_memory_recommendation(rec, "r"))
    assert rec.memory in text and "--overload-downstream-max-conn=" in text and "cgroup v1" in text


def test_the_heap_limit_leaves_room_for_the_heap_the_connections_need():
    """A few connections with much memory outside the heap: the limit grows until the heap limit it implies
    holds the target's heap (here bounded by its working set) below the 98% at which Envoy refuses requests."""
    recorded = Path(__file__).resolve().parent / "data" / "local-memory" / "summary.json"
    measured = RunSummary.model_validate_json(recorded.read_text()).memory
    assert measured is not None
    fits = memory_fits(measured)  # 29 MiB outside the heap at 15,000 connections
    rec = recommend_memory(fits, 1000, 0, headroom=0.3)
    assert rec.overload.max_heap_bytes is not None
    assert rec.upper_bytes <= rec.overload.max_heap_bytes * 0.98


def test_overload_for_a_fixed_limit_caps_connections_where_the_fit_fills_the_limit():
    fits = memory_fits(result(EXACT))
    overload = overload_for(fits, 128 * MIB)
    base = BASE_BYTES - 4 * PER_CONNECTION + OPENING_RESERVE_BYTES
    expected = math.floor((128 * MIB * CONNECTION_SHARE - base) / PER_CONNECTION)
    assert abs(overload.max_connections - expected) <= 1
    assert overload_for(fits, 32 * MIB).max_connections == 0  # the limit does not even hold an idle Envoy


def test_extrapolation_and_two_point_fits_are_warned_about():
    fits = memory_fits(result([point(0), point(1000)]))
    rec = recommend_memory(fits, 50000)
    assert any("extrapolated: 50,000 connections" in w for w in rec.warnings)
    assert any("connection fit rests on two points" in w for w in rec.warnings)


def test_runs_without_memory_fits_get_one_line_naming_the_command():
    for memory, why in ((None, "has no memory model"), (result([point(0)]), "has no connection fit")):
        with pytest.raises(UsageError) as missing:
            require_memory_fits(summary(memory), routes=False)
        assert why in missing.value.one_line() and "gateway-sizer sweep --scenario memory" in missing.value.one_line()
    with pytest.raises(UsageError, match="has no route fit"):
        require_memory_fits(summary(result([point(0), point(1000)])), routes=True)


@pytest.mark.parametrize("value", [-1, 1.5, math.inf, math.nan, 1e12])
def test_nonsense_counts_are_refused(value):
    with pytest.raises(UsageError, match="--connections must be a whole number"):
        check_memory_request(value, 0)


def test_the_report_section_orders_points_and_gives_examples_and_route_costs():
    section = build_memory_section(result(EXACT))
    assert section is not None and section.overload is not None
    assert [r.point.connections for r in section.connection_rows] == [0, 1000, 5000, 10000]
    assert [r.point.routes for r in section.route_costs] == [0, 250, 500, 1000]
    assert {(e.connections, e.routes) for e in section.examples} >= {(1000, 0), (1000, 1000)}
    assert section.route_cost_text is not None and "400 \u00b5s at 0 routes" in section.route_cost_text
    assert build_memory_section(result([])) is None

"""The Kubernetes route sweep's report, from a recorded run on the one-machine cluster (0, 10, 100 and 1,000
HTTPProxies, tests/report/data/kubernetes-routes): Contour's fit, the route programming percentiles and the
per-point table follow from the recorded points, computed here by hand with numpy."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from runner.report.memory_report import build_memory_section
from runner.results import load_summary
from support.processes import run_sizer

RUN = Path(__file__).resolve().parent / "data" / "kubernetes-routes"
MIB = 2**20


def test_contours_fit_and_the_route_latencies_follow_from_the_recorded_points():
    memory = load_summary(RUN).memory
    assert memory is not None
    section = build_memory_section(memory)
    assert section is not None
    points = sorted((p for p in memory.points if p.connections == 0), key=lambda p: p.routes)
    routes = [p.routes for p in points]
    slope, _ = np.polyfit(routes, [p.contour_working_set_bytes for p in points], 1)
    contour = section.fits.describe_contour_routes()
    assert contour is not None and contour.startswith(f"{slope * 1000 / MIB:,.2f} MiB per 1,000 routes ("), contour
    envoy_slope, _ = np.polyfit(routes, [p.working_set_bytes for p in points], 1)
    assert section.fits.describe_routes().startswith(f"{envoy_slope * 1000 / MIB:,.2f} MiB per 1,000 routes")
    # the percentiles of every timed route, linear between order statistics as numpy's default
    samples = [s for p in points if p.programming for s in p.programming.samples_s]
    p50, p99 = np.percentile(samples, [50, 99])
    assert section.programming_text is not None
    assert section.programming_text.startswith(f"p50 {p50:.2f} s, p99 {p99:.2f} s from an HTTPProxy's creation")
    assert f"over {len(samples)} routes created one at a time (with up to 1,000 routes in place" in (
        section.programming_text
    )
    for point in points[1:]:
        timing = point.programming
        assert timing is not None
        assert np.isclose(timing.p99_s, np.percentile(timing.samples_s, 99))
        assert np.isclose(timing.p50_s, np.median(timing.samples_s))


def test_the_markdown_report_has_a_row_per_route_point_with_contours_figures(tmp_path: Path):
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    result = run_sizer("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    report = (run_dir / "report.md").read_text()
    memory = load_summary(RUN).memory
    assert memory is not None
    by_routes = {p.routes: p for p in memory.points}
    for routes, point in by_routes.items():
        cpu, ws = point.contour_cpu_cores, point.contour_working_set_bytes
        assert cpu is not None and ws is not None
        row = f"| {routes:,} | {cpu * 1000:,.1f}m | {ws / MIB:,.1f} MiB | "
        assert row in report, (row, report)
    bulk = by_routes[1000].programming
    assert bulk is not None and bulk.bulk_s is not None and bulk.bulk_status_s is not None
    assert f"| 900 | 880, {bulk.bulk_s:,.2f} s, {bulk.bulk_status_s:,.2f} s | 20 |" in report
    assert (run_dir / "plots" / "memory_route_programming.png").stat().st_size > 10_000


def test_a_memory_only_report_has_no_empty_sections_and_names_the_backend_it_ran(tmp_path: Path):
    run_dir = tmp_path / "run"
    shutil.copytree(RUN.parent / "local-memory", run_dir)
    result = run_sizer("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    report = (run_dir / "report.md").read_text()
    assert "## Memory" in report and "## Conclusions" not in report  # no CPU configuration, so nothing to conclude
    nginx = next(line for line in report.splitlines() if line.startswith("| nginx |"))
    assert "; 1 replica(s), 1 worker process(es) each" in nginx and " - replica" not in nginx, nginx
    assert 'id="conclusions"' not in (run_dir / "report.html").read_text()

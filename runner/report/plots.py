"""The report's plots as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot state)."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from runner.model import MemoryPoint
from runner.quantities import format_cpu
from runner.report.memory_fit import LineFit
from runner.report.model import ConfigSection, Report

__all__ = ["Plot", "render_plots"]

SIZE_IN = (6.4, 3.8)
DPI = 120
FONT_PT = 10.5
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
GRID_COLOR, GRID_LINEWIDTH = "#dddddd", 0.6
_MIB = 2**20
_PERCENTILE_STYLES: dict[str, dict] = {
    "p50": {"linestyle": "--", "linewidth": 1.0, "alpha": 0.6},
    "p95": {"linestyle": "-", "linewidth": 1.6, "marker": "o"},
    "p99": {"linestyle": ":", "linewidth": 1.4},
}


@dataclass(frozen=True)
class Plot:
    """One figure: `name` is its file stem (plots/<name>.png) and its anchor in the HTML."""

    name: str
    title: str
    caption: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def _png(draw: Callable[[Axes], None]) -> bytes:
    with matplotlib.rc_context({"font.size": FONT_PT}):
        figure = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        axes.grid(True, color=GRID_COLOR, linewidth=GRID_LINEWIDTH)
        axes.spines[["top", "right"]].set_visible(False)
        draw(axes)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def _legend_labels(sections: Sequence[ConfigSection]) -> list[str]:
    """Each configuration's label without the parts all of them share: "150m CPU" rather than the full label."""
    parts = [re.split(r", | / ", s.label.removeprefix("Envoy ")) for s in sections]
    varying = [i for i in range(max(map(len, parts), default=0)) if len({tuple(p[i : i + 1]) for p in parts}) > 1]
    return [", ".join(p[i] for i in (varying or [0]) if i < len(p)) for p in parts]


def _ms(value: float | None) -> float:
    return float("nan") if value is None else value


def _knee_vs_cores(report: Report) -> Plot | None:
    if not report.points:
        return None
    fit = report.fit

    def draw(ax: Axes) -> None:
        cores = [p.cpu_cores for p in report.points]
        errors = [
            [p.rps - (p.low if p.low is not None else p.rps) for p in report.points],
            [(p.high if p.high is not None else p.rps) - p.rps for p in report.points],
        ]
        ax.errorbar(cores, [p.rps for p in report.points], yerr=errors, fmt="o", ms=7, capsize=4, color=COLORS[0],
                    zorder=3, label="knee (95% interval)")  # fmt: skip
        for p in report.points:
            ax.annotate(f"{p.rps:,.0f}", (p.cpu_cores, p.rps), textcoords="offset points", xytext=(8, -12))
        capacities = [(k.cpu_cores, k.capacity_rps) for k in report.knees if k.capacity_rps and k.knee_rps]
        if capacities:
            ax.plot([c for c, _ in capacities], [r for _, r in capacities], "^", ms=8, color=COLORS[2], zorder=3,
                    label="capacity (served in full)")  # fmt: skip
        top = max(cores) * 1.15
        if fit is not None:
            low = max(0.0, -fit.intercept / fit.slope) if fit.slope > 0 and fit.intercept < 0 else 0.0
            xs = [low, top]
            label = f"fit: {fit.slope_text().replace(' per core', '/core')}"
            ax.plot(xs, [fit.rps_at(x) for x in xs], "--", color=COLORS[1], label=label)
        ax.set_xlim(0, top)
        ax.set_ylim(bottom=0, top=max([p.high or p.rps for p in report.points] + [c for _, c in capacities]) * 1.15)
        ax.set_xlabel("Envoy CPU limit (cores)")
        ax.set_ylabel(f"knee RPS (at {report.threshold:.0%} CPU)")
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False)

    caption = fit.describe() if fit is not None else (report.no_fit_reason or "")
    return Plot("knee_vs_cores", "Knee RPS vs Envoy cores", caption, _png(draw))


def _rps_vs_users(report: Report) -> Plot | None:
    if not report.configs:
        return None

    labels = _legend_labels(report.configs)

    def draw(ax: Axes) -> None:
        for i, section in enumerate(report.configs):
            ax.plot(
                [r.step.users for r in section.rows],
                [r.step.rps for r in section.rows],
                "o-",
                color=_color(i),
                label=labels[i],
            )
            if section.knee_rps is not None and section.knee_users is not None:
                ax.plot(section.knee_users, section.knee_rps, "*", ms=14, color=_color(i), markeredgecolor="black")
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("throughput (RPS, Locust)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    return Plot("rps_vs_users", "Throughput vs users", "Star: the knee of each configuration.", _png(draw))


def _cpu_vs_rps(report: Report) -> Plot | None:
    if not report.configs:
        return None

    labels = _legend_labels(report.configs)

    def draw(ax: Axes) -> None:
        for i, section in enumerate(report.configs):
            rows = sorted((r.step for r in section.rows), key=lambda s: s.rps)
            means = [r.cpu_utilization_mean * 100 for r in rows]
            # the window's mean can fall just outside the min-max of its samples (Prometheus computes them apart)
            spread = [
                [max(0.0, r.cpu_utilization_mean - r.cpu_utilization_min) * 100 for r in rows],
                [max(0.0, r.cpu_utilization_max - r.cpu_utilization_mean) * 100 for r in rows],
            ]
            ax.errorbar(
                [r.rps for r in rows], means, yerr=spread, fmt="o-", capsize=3, color=_color(i), label=labels[i]
            )
            if section.knee_rps is not None:
                ax.plot(section.knee_rps, report.threshold * 100, "*", ms=14, color=_color(i), markeredgecolor="black")
        ax.axhline(report.threshold * 100, color="black", linestyle=":", linewidth=1.2)
        ax.annotate(
            f"{report.threshold:.0%} threshold",
            (0, report.threshold * 100),
            xycoords=("axes fraction", "data"),
            xytext=(4, 4),
            textcoords="offset points",
        )
        ax.set_xlabel("throughput (RPS, Locust)")
        ax.set_ylabel("Envoy CPU utilization (% of limit)")
        ax.set_xlim(left=0)
        ax.set_ylim(0, max(105.0, *(r.step.cpu_utilization_max * 100 + 3 for s in report.configs for r in s.rows)))
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="lower right", frameon=False, fontsize="small")

    caption = "Mean over each window, bars from min to max; star: the interpolated knee."
    return Plot("cpu_vs_rps", "CPU utilization vs RPS", caption, _png(draw))


def _latency_vs_rps(report: Report) -> Plot | None:
    sections = [s for s in report.configs if any(r.step.p95_ms is not None for r in s.rows)]
    if not sections:
        return None

    labels = _legend_labels(sections)

    def draw(ax: Axes) -> None:
        worst = 1.0
        for i, section in enumerate(sections):
            rows = sorted((r.step for r in section.rows if r.step.p95_ms is not None), key=lambda s: s.rps)
            worst = max(worst, *(v for r in rows for v in (r.p95_ms, r.p99_ms) if v is not None))
            xs = [r.rps for r in rows]
            for style, values in (
                (_PERCENTILE_STYLES["p95"], [r.p95_ms for r in rows]),
                (_PERCENTILE_STYLES["p99"], [r.p99_ms for r in rows]),
                (_PERCENTILE_STYLES["p50"], [r.p50_ms for r in rows]),
            ):
                ax.plot(xs, [_ms(v) for v in values], color=_color(i), **style)
            if section.knee_rps is not None:
                ax.axvline(section.knee_rps, color=_color(i), linewidth=0.8, alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylim(top=worst * 8)  # a band above the data for the two legends
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.set_xlabel("throughput (RPS, Locust)")
        ax.set_ylabel("latency (ms, log scale)")
        ax.set_xlim(left=0)
        ax.xaxis.set_major_formatter("{x:,.0f}")
        configs = [Line2D([], [], color=_color(i), marker="o", label=label) for i, label in enumerate(labels)]
        styles = [
            Line2D([], [], color="#555555", label=name, **{k: v for k, v in style.items() if k != "marker"})
            for name, style in _PERCENTILE_STYLES.items()
        ]
        ax.add_artist(ax.legend(handles=configs, loc="upper left", frameon=False, fontsize="small"))
        ax.legend(handles=styles, loc="upper right", frameon=False, fontsize="small", ncol=3)

    caption = "Color: configuration; vertical lines at each knee."
    return Plot("latency_vs_rps", "Latency percentiles vs RPS", caption, _png(draw))


def _cost_vs_rps(report: Report) -> Plot | None:
    """Envoy's CPU time per request against the load: flat if the cost per request did not depend on load."""
    sections = [s for s in report.configs if any(r.step.cpu_per_request_us for r in s.rows)]
    if not sections:
        return None
    labels = _legend_labels(sections)

    def draw(ax: Axes) -> None:
        for i, section in enumerate(sections):
            costs = sorted((r.step.rps, r.step.cpu_per_request_us or 0.0, r.at_limit) for r in section.rows)
            points = [(rps, cost) for rps, cost, _ in costs if cost > 0]
            ringed = [(rps, cost) for rps, cost, limit in costs if cost > 0 and limit]
            ax.plot(*zip(*points, strict=True), "o", color=_color(i), label=labels[i], alpha=0.85)
            if ringed:
                ax.plot(*zip(*ringed, strict=True), "o", mfc="none", ms=11, color=_color(i))
            knee = section.knee
            if knee.knee_rps is not None and knee.cpu_per_request_us is not None:
                ax.plot(knee.knee_rps, knee.cpu_per_request_us, "*", ms=14, color=_color(i), markeredgecolor="black")
        ax.set_xlabel("throughput (RPS, Locust)")
        ax.set_ylabel("Envoy CPU per request (µs)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper right", frameon=False, fontsize="small")

    caption = (
        "Envoy's CPU time per request in each window; ringed: at or past the threshold; star: at the knee. "
        "A falling cost means utilization is not proportional to RPS."
    )
    return Plot("cost_vs_rps", "CPU per request vs RPS", caption, _png(draw))


def _profiles(report: Report) -> Plot | None:
    """Each traffic profile's knee at each CPU limit, side by side, with the knees' 95% intervals."""
    comparison = report.profiles
    if comparison is None:
        return None
    rows = [r for r in comparison.rows if r.knee_rps is not None]
    if not rows:
        return None
    groups = list(dict.fromkeys(r.group for r in comparison.rows))
    names = list(dict.fromkeys(r.profile for r in comparison.rows))
    width = 0.8 / len(names)

    def draw(ax: Axes) -> None:
        for i, name in enumerate(names):
            mine = [(groups.index(r.group), r) for r in rows if r.profile == name]
            if not mine:
                continue
            x = [g + (i - (len(names) - 1) / 2) * width for g, _ in mine]
            knees = [r.knee_rps or 0.0 for _, r in mine]
            low = [k - (r.knee_low if r.knee_low is not None else k) for k, (_, r) in zip(knees, mine, strict=True)]
            high = [(r.knee_high if r.knee_high is not None else k) - k for k, (_, r) in zip(knees, mine, strict=True)]
            ax.bar(x, knees, width * 0.95, color=_color(i), label=name, yerr=[low, high], capsize=3)
        cpus = {r.group: r.cpu_cores for r in comparison.rows}
        ax.set_xticks(range(len(groups)), [f"Envoy {format_cpu(cpus[g])}" for g in groups])
        ax.set_ylabel("knee (RPS)")
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    caption = "Knee per traffic profile at each Envoy CPU limit; whiskers: the knee's 95% interval where it has one."
    return Plot("profiles", "Knee per traffic profile", caption, _png(draw))


def _memory_plot(
    report: Report, name: str, rows_of: str, x_of: Callable[[MemoryPoint], float], fit_of: str, x_label: str
) -> Plot | None:
    """Working set (and Envoy's heap) against `x_of`, with the fitted line: the memory model's two plots."""
    section = report.memory
    if section is None:
        return None
    rows = [r.point for r in getattr(section, rows_of) if r.point.working_set_bytes is not None]
    fit: LineFit | None = getattr(section.fits, fit_of)
    if len(rows) < 2:
        return None

    def draw(ax: Axes) -> None:
        xs = [x_of(p) for p in rows]
        ax.plot(xs, [(p.working_set_bytes or 0) / _MIB for p in rows], "o", ms=7, color=COLORS[0], zorder=3,
                label="working set (mean over the window)")  # fmt: skip
        heap = [(x, p.heap_bytes / _MIB) for x, p in zip(xs, rows, strict=True) if p.heap_bytes is not None]
        if heap:
            ax.plot(*zip(*heap, strict=True), "s", ms=5, color=COLORS[2], label="Envoy heap (server.memory_heap_size)")
        if fit is not None:
            ends = [0.0, max(xs) * 1.05]
            slope = (
                f"{fit.slope / 2**10:,.1f} KiB per connection"
                if fit_of == "connections"
                else (f"{fit.slope * 1000 / _MIB:,.2f} MiB per 1,000 routes")
            )
            ax.plot(
                ends,
                [fit.at(x) / _MIB for x in ends],
                "--",
                color=COLORS[1],
                label=f"fit: {slope}, R² {fit.r_squared:.3f}",
            )
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(x_label)
        ax.set_ylabel("MiB")
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    fits = section.fits
    caption = (fits.describe_connections() if fit_of == "connections" else fits.describe_routes()) + "; "
    caption += f"Envoy at {section.envoy_memory}, {fits.cgroup_note.split(':')[0]}."
    title = "Envoy memory vs held connections" if fit_of == "connections" else "Envoy memory vs routes"
    return Plot(name, title, caption, _png(draw))


def _memory_vs_connections(report: Report) -> Plot | None:
    return _memory_plot(
        report, "memory_vs_connections", "connection_rows",
        lambda p: p.envoy_connections if p.envoy_connections is not None else float(p.held),
        "connections", "Envoy's active downstream connections",
    )  # fmt: skip


def _memory_vs_routes(report: Report) -> Plot | None:
    return _memory_plot(report, "memory_vs_routes", "route_rows", lambda p: float(p.routes), "routes",
                        "extra routes (virtual hosts, or HTTPProxies on Kubernetes)")  # fmt: skip


def _route_programming(report: Report) -> Plot | None:
    """Each timed route's seconds from creation to served, against the routes in place; p50 and p99 per point."""
    section = report.memory
    if section is None or section.programming_text is None:
        return None
    timed = [(r.point.routes, r.point.programming) for r in section.control_plane_rows]
    timed_points = [(routes, g) for routes, g in timed if g is not None and g.samples_s]

    def draw(ax: Axes) -> None:
        for index, (routes, g) in enumerate(timed_points):
            ax.plot([routes] * len(g.samples_s), g.samples_s, "o", ms=4, alpha=0.45, color=COLORS[0],
                    label="one route" if index == 0 else None)  # fmt: skip
        xs = [routes for routes, _ in timed_points]
        for name, color in (("p50", COLORS[2]), ("p99", COLORS[1])):
            ys = [g.percentile_s(int(name[1:])) or 0.0 for _, g in timed_points]
            ax.plot(xs, ys, color=color, label=name, **_PERCENTILE_STYLES[name])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("routes (HTTPProxies) in place")
        ax.set_ylabel("seconds from creation to served")
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    caption = f"Route programming: {section.programming_text}."
    return Plot("memory_route_programming", "Route programming latency vs routes", caption, _png(draw))


def render_plots(report: Report) -> list[Plot]:
    """Every plot the data supports, in reading order."""
    makers = (_knee_vs_cores, _profiles, _cpu_vs_rps, _cost_vs_rps, _rps_vs_users, _latency_vs_rps,
              _memory_vs_connections, _memory_vs_routes, _route_programming)  # fmt: skip
    made = (make(report) for make in makers)
    return [plot for plot in made if plot is not None]

"""The report's plots of the run's windows and knees (the memory model's are runner.report.memory_plots), each
drawn by runner.report.drawing; `render_plots` makes every plot the data supports."""

from __future__ import annotations

import re
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from runner.quantities import format_cpu
from runner.report.drawing import COLORS, PERCENTILE_STYLES, Plot, color, png
from runner.report.memory_plots import MEMORY_PLOTS
from runner.report.model import Report
from runner.report.rows import ConfigRow

__all__ = ["render_plots"]


def _legend_labels(sections: Sequence[ConfigRow]) -> list[str]:
    """Each configuration's label without the parts all of them share: "150m CPU" rather than the full label."""
    parts = [re.split(r", | / ", s.label.removeprefix("Envoy ")) for s in sections]
    varying = [i for i in range(max(map(len, parts), default=0)) if len({tuple(p[i : i + 1]) for p in parts}) > 1]
    return [", ".join(p[i] for i in (varying or [0]) if i < len(p)) for p in parts]


def _ms(value: float | None) -> float:
    return float("nan") if value is None else value


def _knee_per_core(report: Report) -> Plot | None:
    """The sizing series' knee per core at each CPU limit with its interval; flat if the knee grew in proportion
    to the limit. With three limits or more in rounds, the growth knee ~ cores^g drawn through them."""
    series = report.headline.series
    if series is None:
        return None
    knees = [r for r in series.rates if r.source == "knee"]
    broke = [r for r in series.rates if r.source == "capacity"]

    def draw(ax: Axes) -> None:
        if knees:
            intervals = [r.per_core_interval or (r.per_core, r.per_core) for r in knees]
            errors = [
                [r.per_core - i[0] for r, i in zip(knees, intervals, strict=True)],
                [i[1] - r.per_core for r, i in zip(knees, intervals, strict=True)],
            ]
            ax.errorbar(
                [r.cores for r in knees],
                [r.per_core for r in knees],
                yerr=errors,
                fmt="o",
                ms=7,
                capsize=4,
                color=COLORS[0],
                zorder=3,
                label="knee per core (95% interval)",
            )
            for r in knees:
                ax.annotate(f"{r.per_core:,.0f}", (r.cores, r.per_core), textcoords="offset points", xytext=(8, -12))
        if broke:
            ax.plot(
                [r.cores for r in broke],
                [r.per_core for r in broke],
                "^",
                ms=8,
                color=COLORS[1],
                zorder=3,
                label="capacity per core (latency broke first)",
            )
        growth, top = series.scaling.growth, series.largest.cores * 1.25
        if growth is not None:
            anchor = series.largest
            xs = [series.smallest.cores * 0.8 + i * (top - series.smallest.cores * 0.8) / 40 for i in range(41)]
            g = growth.exponent.value
            ax.plot(
                xs,
                [anchor.per_core * (x / anchor.cores) ** (g - 1) for x in xs],
                "--",
                color=COLORS[2],
                label=f"growth: knee ~ cores^{g:.2f}",
            )
        ax.set_xlim(0, top)
        ax.set_ylim(bottom=0, top=max((r.per_core_interval or (0, r.per_core))[1] for r in series.rates) * 1.2)
        ax.set_xlabel("Envoy CPU limit (cores)")
        ax.set_ylabel(f"RPS per core (at {report.threshold:.0%} CPU)")
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="lower right", frameon=False, fontsize="small")

    title = f"Knee per core vs Envoy CPU limit ({series.profile}, {series.arrivals} arrivals)"
    return Plot("knee_per_core", title, series.scaling.text, png(draw))


def _measured(report: Report) -> list[ConfigRow]:
    return [section.row for section in report.sections]


def _rps_vs_users(report: Report) -> Plot | None:
    rows = _measured(report)
    if not rows:
        return None
    labels = _legend_labels(rows)

    def draw(ax: Axes) -> None:
        for i, row in enumerate(rows):
            ax.plot(
                [s.step.users for s in row.steps],
                [s.step.rps for s in row.steps],
                "o-",
                color=color(i),
                label=labels[i],
            )
            if row.knee is not None and row.knee.users is not None:
                ax.plot(row.knee.users, row.knee.rps, "*", ms=14, color=color(i), markeredgecolor="black")
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("throughput (RPS, Locust)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    return Plot("rps_vs_users", "Throughput vs users", "Star: the knee of each configuration.", png(draw))


def _cpu_vs_rps(report: Report) -> Plot | None:
    measured = _measured(report)
    if not measured:
        return None
    labels = _legend_labels(measured)

    def draw(ax: Axes) -> None:
        for i, row in enumerate(measured):
            rows = sorted((s.step for s in row.steps), key=lambda s: s.rps)
            means = [r.cpu_utilization_mean * 100 for r in rows]
            # the window's mean can fall just outside the min-max of its samples (Prometheus computes them apart)
            spread = [
                [max(0.0, r.cpu_utilization_mean - r.cpu_utilization_min) * 100 for r in rows],
                [max(0.0, r.cpu_utilization_max - r.cpu_utilization_mean) * 100 for r in rows],
            ]
            ax.errorbar([r.rps for r in rows], means, yerr=spread, fmt="o-", capsize=3, color=color(i), label=labels[i])
            if row.knee is not None:
                ax.plot(row.knee.rps, report.threshold * 100, "*", ms=14, color=color(i), markeredgecolor="black")
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
        ax.set_ylim(0, max(105.0, *(s.step.cpu_utilization_max * 100 + 3 for r in measured for s in r.steps)))
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="lower right", frameon=False, fontsize="small")

    caption = "Mean over each window, bars from min to max; star: the knee."
    return Plot("cpu_vs_rps", "CPU utilization vs RPS", caption, png(draw))


def _latency_vs_rps(report: Report) -> Plot | None:
    measured = [r for r in _measured(report) if any(s.step.p95_ms is not None for s in r.steps)]
    if not measured:
        return None
    labels = _legend_labels(measured)

    def draw(ax: Axes) -> None:
        worst = 1.0
        for i, row in enumerate(measured):
            rows = sorted((s.step for s in row.steps if s.step.p95_ms is not None), key=lambda s: s.rps)
            worst = max(worst, *(v for r in rows for v in (r.p95_ms, r.p99_ms) if v is not None))
            xs = [r.rps for r in rows]
            for style, values in (
                (PERCENTILE_STYLES["p95"], [r.p95_ms for r in rows]),
                (PERCENTILE_STYLES["p99"], [r.p99_ms for r in rows]),
                (PERCENTILE_STYLES["p50"], [r.p50_ms for r in rows]),
            ):
                ax.plot(xs, [_ms(v) for v in values], color=color(i), **style)
            if row.knee is not None:
                ax.axvline(row.knee.rps, color=color(i), linewidth=0.8, alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylim(top=worst * 8)  # a band above the data for the two legends
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.set_xlabel("throughput (RPS, Locust)")
        ax.set_ylabel("latency (ms, log scale)")
        ax.set_xlim(left=0)
        ax.xaxis.set_major_formatter("{x:,.0f}")
        configs = [Line2D([], [], color=color(i), marker="o", label=label) for i, label in enumerate(labels)]
        styles = [
            Line2D([], [], color="#555555", label=name, **{k: v for k, v in style.items() if k != "marker"})
            for name, style in PERCENTILE_STYLES.items()
        ]
        ax.add_artist(ax.legend(handles=configs, loc="upper left", frameon=False, fontsize="small"))
        ax.legend(handles=styles, loc="upper right", frameon=False, fontsize="small", ncol=3)

    caption = "Color: configuration; vertical lines at each knee."
    return Plot("latency_vs_rps", "Latency percentiles vs RPS", caption, png(draw))


def _cost_vs_rps(report: Report) -> Plot | None:
    """Envoy's CPU time per request against the load: flat if the cost per request did not depend on load;
    throttled windows ringed (they cost more and say where Envoy breaks, not what a request costs)."""
    measured = [r for r in _measured(report) if any(s.step.cpu_per_request_us for s in r.steps)]
    if not measured:
        return None
    labels = _legend_labels(measured)

    def draw(ax: Axes) -> None:
        for i, row in enumerate(measured):
            costs = sorted(
                (s.step.rps, s.step.cpu_per_request_us or 0.0, s.step.regime == "throttled") for s in row.steps
            )
            points = [(rps, cost) for rps, cost, _ in costs if cost > 0]
            ringed = [(rps, cost) for rps, cost, throttled in costs if cost > 0 and throttled]
            ax.plot(*zip(*points, strict=True), "o", color=color(i), label=labels[i], alpha=0.85)
            if ringed:
                ax.plot(*zip(*ringed, strict=True), "o", mfc="none", ms=11, color=color(i))
            if row.knee is not None and row.cpu_per_request_us is not None:
                ax.plot(row.knee.rps, row.cpu_per_request_us, "*", ms=14, color=color(i), markeredgecolor="black")
        ax.set_xlabel("throughput (RPS, Locust)")
        ax.set_ylabel("Envoy CPU per request (\u00b5s)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper right", frameon=False, fontsize="small")

    caption = (
        "Envoy's CPU time per request in each window; ringed: windows in the throttled regime (CFS throttling in 15% "
        "of periods or more); star: at the knee. A falling cost means utilization is not proportional to RPS."
    )
    return Plot("cost_vs_rps", "CPU per request vs RPS", caption, png(draw))


def _profiles(report: Report) -> Plot | None:
    """Each traffic profile's knee at each CPU limit, side by side, with the knees' 95% intervals."""
    comparison = report.profiles
    if comparison is None:
        return None
    rows = [p.row for p in comparison.rows]
    valid = [(r, r.knee) for r in rows if r.knee is not None]
    if not valid:
        return None
    groups = list(dict.fromkeys(p.group for p in comparison.rows))
    group_of = {p.row.config.key: p.group for p in comparison.rows}
    names = list(dict.fromkeys(r.profile for r in rows))
    width = 0.8 / len(names)

    def draw(ax: Axes) -> None:
        for i, name in enumerate(names):
            mine = [(groups.index(group_of[r.config.key]), k) for r, k in valid if r.profile == name]
            if not mine:
                continue
            x = [g + (i - (len(names) - 1) / 2) * width for g, _ in mine]
            low = [k.rps - (k.low if k.low is not None else k.rps) for _, k in mine]
            high = [(k.high if k.high is not None else k.rps) - k.rps for _, k in mine]
            ax.bar(x, [k.rps for _, k in mine], width * 0.95, color=color(i), label=name, yerr=[low, high], capsize=3)
        cpus = {p.group: p.row.cpu_cores for p in comparison.rows}
        ax.set_xticks(range(len(groups)), [f"Envoy {format_cpu(cpus[g])}" for g in groups])
        ax.set_ylabel("knee (RPS)")
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.legend(loc="upper left", frameon=False, fontsize="small")

    caption = "Knee per traffic profile at each Envoy CPU limit; whiskers: the knee's 95% interval where it has one."
    return Plot("profiles", "Knee per traffic profile", caption, png(draw))


def render_plots(report: Report) -> list[Plot]:
    """Every plot the data supports, in reading order."""
    makers = (
        _knee_per_core,
        _profiles,
        _cpu_vs_rps,
        _cost_vs_rps,
        _rps_vs_users,
        _latency_vs_rps,
        *MEMORY_PLOTS,
    )
    made = (make(report) for make in makers)
    return [plot for plot in made if plot is not None]

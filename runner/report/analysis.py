"""What the numbers say, pure: a sentence per step as the reference report writes, and the run's conclusions.

Every sentence is computed from the measurements and carries the figure behind it; where the data cannot
back a claim (too few knees, no latency, no generator CPU) the claim is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner.guards import (
    FAIL_RATIO_LIMIT,
    GENERATOR_CPU_LIMIT,
    LIMIT_OVERSHOOT,
    RPS_MISMATCH_LIMIT,
    SCRAPE_INTERVAL_S,
    THROTTLE_EVIDENCE_FROM,
    limit_enforced,
    rps_mismatch_limit,
)
from runner.model import ConfigResult, RunSummary, Step
from runner.quantities import parse_memory
from runner.report import formatting as fmt
from runner.report.sizing import LINEAR_R_SQUARED, Fit, KneePoint, valid_knee

__all__ = ["Conclusion", "conclusions", "step_analysis"]

IDLE_BELOW = 0.75  # a step under this utilization leaves its CPU limit "not fully used"
LATENCY_RISE_FACTOR = 2.0  # p95 at least this many times the lightest step's is called a rise
LATENCY_RISE_MIN_MS = 5.0  # and at least this many ms more
MEMORY_NOTABLE = 0.8  # working set over this share of the limit is worth a warning


@dataclass(frozen=True)
class Conclusion:
    """One finding: the sentence, the figures that back it, and the plot that shows it (if any)."""

    text: str
    figure: str
    plot: str | None = None


def _latency_rose(before_ms: float, after_ms: float) -> bool:
    """A rise worth a sentence: at least LATENCY_RISE_FACTOR times and LATENCY_RISE_MIN_MS more."""
    return after_ms >= before_ms * LATENCY_RISE_FACTOR and after_ms - before_ms >= LATENCY_RISE_MIN_MS


def _lightest_p95(steps: Sequence[Step]) -> float | None:
    with_latency = [s for s in steps if s.p95_ms is not None]
    return min(with_latency, key=lambda s: s.offered).p95_ms if with_latency else None


def step_analysis(step: Step, steps: Sequence[Step], threshold: float) -> str:
    """The reference report's analysis column, from utilization, latency and failures of one step."""
    mean = step.cpu_utilization_mean
    if mean < IDLE_BELOW:
        text = f"Resources not fully used ({1 - mean:.0%} of the CPU limit idle): room for more requests."
    elif mean < threshold:
        text = f"Approaching full load ({1 - mean:.0%} idle): a little more load reaches the limit."
    else:
        text = f"At the limit: CPU at {mean:.0%}, past the {threshold:.0%} threshold; this limit's maximum throughput."
    lightest, p95 = _lightest_p95(steps), step.p95_ms
    if lightest and p95 is not None and _latency_rose(lightest, p95):
        text += f" p95 latency {p95 / lightest:.0f}x the lightest step's ({p95:.0f} ms vs {lightest:.0f} ms)."
    for guard in step.guards:
        text += f" Guard {guard.guard}: {guard.detail}."
    if step.fail_ratio > FAIL_RATIO_LIMIT:
        text += f" {step.fail_ratio:.1%} of requests failed."
    elif step.failures:
        text += f" {step.failures:,} failed request(s)."
    return text


def _knee_status(summary: RunSummary, threshold: float) -> Conclusion | None:
    finished = [c for c in summary.configs if c.status != "running"]
    if not finished:
        return None
    valid = [c for c in finished if valid_knee(c) is not None]
    if len(valid) == len(finished):
        return Conclusion(
            f"Every configuration reached the {threshold:.0%} CPU knee, so each has a sizing figure.",
            f"{len(valid)} of {len(finished)} configurations saturated",
        )
    others = "; ".join(
        f"{c.label}: {c.status}" + (f", {c.reason}" if c.reason else "") for c in finished if c not in valid
    )
    return Conclusion(
        f"{len(finished) - len(valid)} configuration(s) have no valid knee and are left out of the sizing.",
        f"{len(valid)} of {len(finished)} saturated; {others}",
    )


def _linearity(fit: Fit) -> Conclusion:
    low, high = fit.cores_range
    span = f"{fmt.cpu(low)}-{fmt.cpu(high)}"
    figure = f"{fit.equation()}, R^2 {fit.r_squared:.3f} over {len(fit.points)} knees ({span})"
    if fit.slope <= 0:
        text = "Knee RPS does not grow with Envoy's CPU limit: something other than Envoy limited throughput."
    elif len(fit.points) == 2:
        text = (
            f"Each added Envoy core adds about {fit.slope:,.0f} RPS at the knee between {span}; two knees "
            "cannot show whether the growth is linear."
        )
    elif fit.r_squared >= LINEAR_R_SQUARED:
        text = f"Envoy's CPU limit decides throughput: each added core adds {fit.slope:,.0f} RPS at the knee."
    else:
        text = f"Knee RPS is not proportional to Envoy cores over {span}: size only near the measured limits."
    return Conclusion(text, figure, "knee_vs_cores")


def _scaling(fit: Fit) -> Conclusion | None:
    first, last = fit.points[0], fit.points[-1]
    if fit.slope <= 0 or last.cpu_cores <= first.cpu_cores:
        return None
    cores_x, knee_x = last.cpu_cores / first.cpu_cores, last.rps / first.rps
    per_core = ", ".join(f"{p.rps_per_core:,.0f} at {fmt.cpu(p.cpu_cores)}" for p in fit.points)
    figure = f"RPS per core: {per_core}; intercept {fit.intercept:,.0f} RPS"
    if abs(knee_x / cores_x - 1) <= 0.1:
        text = f"Knee RPS grows in proportion to the CPU limit: {knee_x:.2f}x the RPS for {cores_x:.2f}x the cores."
    elif knee_x > cores_x:
        text = (
            f"Knee RPS grows faster than the CPU limit ({knee_x:.2f}x for {cores_x:.2f}x the cores): small "
            "limits are less efficient, so size from the fit rather than one limit's RPS per core."
        )
    else:
        text = (
            f"Knee RPS grows slower than the CPU limit ({knee_x:.2f}x for {cores_x:.2f}x the cores): each "
            "added core buys less, so size from the fit rather than one limit's RPS per core."
        )
    return Conclusion(text, figure, "knee_vs_cores")


def _latency(configs: Sequence[ConfigResult], threshold: float) -> Conclusion | None:
    figures, rose, jumped = [], [], []
    for config in configs:
        below = [s.p95_ms for s in config.steps if s.p95_ms is not None and s.cpu_utilization_mean < threshold]
        above = [s.p95_ms for s in config.steps if s.p95_ms is not None and s.cpu_utilization_mean >= threshold]
        if below and above:
            figures.append(f"{fmt.cpu(config.envoy.cpu_cores)}: {max(below):.0f} ms -> {max(above):.0f} ms")
            rose.append(_latency_rose(max(below), max(above)))
            jumped += [fmt.cpu(config.envoy.cpu_cores)] if rose[-1] else []
    if not figures:
        return None
    figure = "worst p95 below -> at/above the threshold: " + "; ".join(figures)
    within = f"within {LATENCY_RISE_FACTOR:g}x"
    if all(rose):
        text = f"Latency jumps once Envoy passes {threshold:.0%} CPU: keep headroom below the knee."
    elif not any(rose):
        text = f"p95 latency stayed {within} of its level below {threshold:.0%} CPU in these windows."
    else:
        text = (
            f"p95 latency jumped past {threshold:.0%} CPU at {', '.join(jumped)} only; elsewhere it stayed {within}: "
            "keep headroom below the knee."
        )
    return Conclusion(text, figure, "latency_vs_rps")


def _failures(steps: Sequence[Step]) -> Conclusion | None:
    requests = sum(s.requests for s in steps)
    if not requests:
        return None
    failures = sum(s.failures for s in steps)
    figure = f"{failures:,} of {requests:,} requests in {len(steps)} steps"
    if failures == 0:
        return Conclusion("No request failed: every step's RPS is served traffic.", figure)
    worst = max(steps, key=lambda s: s.fail_ratio)
    return Conclusion(
        f"{failures / requests:.2%} of requests failed, at worst {worst.fail_ratio:.1%} in one step.",
        figure,
    )


def _agreement(steps: Sequence[Step], threshold: float) -> Conclusion | None:
    """Did Locust and Envoy count the same load? Judged as the rps-mismatch guard judges it: below the
    threshold (a throttled Envoy is scraped late), each step against what chance allows in its window."""
    judged = [s for s in steps if s.envoy_rps and s.rps > 0 and s.cpu_utilization_mean < threshold]
    if not judged:
        return None

    def gap(step: Step) -> float:
        return abs(step.envoy_rps - step.rps) / step.rps

    worst = max(gap(s) for s in judged)
    figure = f"largest difference {worst:.1%} over {len(judged)} steps below the threshold"
    beyond = [s for s in judged if gap(s) > rps_mismatch_limit(s, SCRAPE_INTERVAL_S)]
    if not beyond:
        chance = " (what chance allows in their short windows)" if worst > RPS_MISMATCH_LIMIT else ""
        return Conclusion(
            f"Locust and Envoy counted the same load within {worst:.1%}{chance} at every step below the threshold.",
            figure,
        )
    return Conclusion(
        f"Locust's and Envoy's RPS differ by up to {max(gap(s) for s in beyond):.0%} in {len(beyond)} step(s), more "
        "than chance allows: some requests were not counted on one side.",
        figure,
    )


def _generator(steps: Sequence[Step]) -> Conclusion | None:
    peak = max((s.generator_cpu_max for s in steps), default=0.0)
    if peak <= 0:
        return None
    figure = f"busiest Locust worker at {peak:.0%} CPU"
    if peak < GENERATOR_CPU_LIMIT:
        return Conclusion(f"The load generator had CPU to spare (at most {peak:.0%} per Locust worker).", figure)
    return Conclusion(
        f"A Locust worker reached {peak:.0%} CPU: the generator may have limited the load; add Locust workers.",
        figure,
    )


def _baseline(summary: RunSummary) -> Conclusion | None:
    measured = summary.baseline
    if measured is None or not measured.direct.rps:
        return None
    direct, gateway = measured.direct.rps, measured.gateway.rps
    return Conclusion(
        f"Through Envoy ({fmt.cpu(measured.envoy_cpu_cores)} CPU) nginx served {gateway / direct:.0%} of its direct "
        "throughput with the same load.",
        f"direct {direct:,.0f} RPS, through Envoy {gateway:,.0f} RPS, {measured.users} closed-loop users",
    )


def _memory_limit(config: ConfigResult) -> int | None:
    try:
        return parse_memory(config.envoy.memory)
    except ValueError:
        return None


def _memory(configs: Sequence[ConfigResult]) -> Conclusion | None:
    peaks = [(max((s.envoy_memory_bytes for s in c.steps), default=0.0), c) for c in configs]
    peaks = [(peak, c) for peak, c in peaks if peak > 0]
    if not peaks:
        return None
    peak, config = max(peaks, key=lambda pair: pair[0])
    limit = _memory_limit(config)
    share = f", {peak / limit:.0%} of its {config.envoy.memory} limit" if limit else ""
    figure = f"peak working set {fmt.mebibytes(peak)} ({config.label}){share}"
    if limit and peak / limit >= MEMORY_NOTABLE:
        return Conclusion("Envoy's memory came close to its limit: raise the memory limit before sizing CPU.", figure)
    return Conclusion("Memory does not constrain Envoy at these loads; CPU is the resource to size.", figure)


def _knee_trust(configs: Sequence[ConfigResult]) -> Conclusion | None:
    """How well the knees are known: their 95% intervals, and which ones have none."""
    knees = [(c, c.valid_knee) for c in configs if c.valid_knee is not None]
    if not knees:
        return None
    widths = [(c, k.half_width) for c, k in knees if k.half_width is not None]
    figure = "; ".join(
        f"{fmt.cpu(c.envoy.cpu_cores)}: {k.rps:,.0f} RPS, "
        + (f"95% CI {k.low:,.0f}-{k.high:,.0f} (+-{k.half_width:.1%})" if k.half_width is not None else "no interval")
        + f", {len(c.steps)} windows"
        for c, k in knees
    )
    if len(widths) == len(knees):
        worst = max(w for _, w in widths if w is not None)
        return Conclusion(
            f"Each knee is known to within +-{worst:.0%} (95% confidence, from the windows' scatter).", figure
        )
    unsure = ", ".join(fmt.cpu(c.envoy.cpu_cores) for c, k in knees if k.half_width is None)
    return Conclusion(
        f"The knee at {unsure} has no confidence interval: its windows scatter too much around the threshold "
        "(or too few were measured); treat it as rough and size from capacity or a longer sweep.",
        figure,
    )


def _plateau_and_headroom(configs: Sequence[ConfigResult], threshold: float) -> Conclusion | None:
    """Capacity against the knee, and a utilization that flattens near the threshold."""
    rows = [(c, c.valid_knee, c.capacity) for c in configs if c.valid_knee is not None and c.capacity is not None]
    if not rows:
        return None
    figure = "; ".join(
        f"{fmt.cpu(c.envoy.cpu_cores)}: knee {k.rps:,.0f}, capacity {cap.rps:,.0f} ({cap.rps / k.rps - 1:+.0%})"
        + (f", utilization ~ RPS^{k.exponent:.2f}" if k.exponent is not None else "")
        for c, k, cap in rows
        if k is not None and cap is not None
    )
    flat = [fmt.cpu(c.envoy.cpu_cores) for c, k, _ in rows if k and k.plateau]
    above = [cap.rps / k.rps - 1 for _, k, cap in rows if k is not None and cap is not None]
    if flat:
        text = (
            f"At {', '.join(flat)} utilization stays near {threshold:.0%} over a wide range of load: the knee is not "
            f"sharp there; Envoy still served {min(above):.0%}-{max(above):.0%} more at capacity, the sharper figure."
        )
    else:
        text = (
            f"Envoy serves {min(above):.0%}-{max(above):.0%} more than the knee before it breaks: its CPU per request "
            f"falls as load rises, so the {threshold:.0%} knee leaves real headroom."
        )
    return Conclusion(text, figure, "cost_vs_rps")


def _arrival_models(configs: Sequence[ConfigResult]) -> Conclusion | None:
    """The same resources under several arrival models: how far apart they put the knee."""
    groups: dict[str, dict[str, float]] = {}
    for c in configs:
        if c.valid_knee is not None:
            groups.setdefault(re.sub(r",arrivals=[^,]*", "", c.key), {})[c.arrivals] = c.valid_knee.rps
    pairs = [(key, knees) for key, knees in groups.items() if len(knees) > 1]
    if not pairs:
        return None
    parts = []
    for key, knees in pairs:
        base_name = "poisson" if "poisson" in knees else sorted(knees)[0]
        base = knees[base_name]
        others = ", ".join(
            f"{name} {rps:,.0f} ({rps / base - 1:+.0%})" for name, rps in knees.items() if name != base_name
        )
        parts.append(f"{key.split(',')[0].removeprefix('envoy=')}: {base_name} {base:,.0f}, {others}")
    spread = max(max(k.values()) / min(k.values()) - 1 for _, k in pairs)
    return Conclusion(
        f"How requests arrive moves the knee by up to {spread:.0%}: state the arrival model with every knee, "
        "and size from the one that matches the traffic (Poisson: many independent clients).",
        "; ".join(parts),
    )


SPEED_NOTABLE = 0.05  # the machine's speed moving more than this between configurations is worth a word


def _machine_speed(configs: Sequence[ConfigResult]) -> Conclusion | None:
    """How much the machine's own speed moved during the run (a reference loop on Envoy's CPUs)."""
    speeds = [(c, c.machine_speed) for c in configs if c.machine_speed]
    if len(speeds) < 2:
        return None
    values = [s for _, s in speeds if s]
    moved = max(values) / min(values) - 1
    figure = "reference loop before each configuration: " + ", ".join(
        f"{fmt.cpu(c.envoy.cpu_cores)} {s:.2f}M/s" for c, s in speeds
    )
    if moved <= SPEED_NOTABLE:
        return Conclusion(f"The machine ran at a steady speed through the run (within {moved:.0%}).", figure)
    return Conclusion(
        f"The machine itself ran up to {moved:.0%} faster at one configuration than at another: knees measured "
        "on it can differ by as much for that reason alone (a virtual machine shares its host).",
        figure,
    )


def _limit_enforced(configs: Sequence[ConfigResult]) -> Conclusion | None:
    """The CPU limit held (guards.limit_enforced per configuration): Envoy never more than LIMIT_OVERSHOOT
    above it, and throttled where it ran at it."""
    steps = [s for c in configs for s in c.steps]
    if not steps:
        return None
    peak = max(s.cpu_utilization_max for s in steps)
    at_limit = [
        s.throttled_share
        for s in steps
        if s.cpu_utilization_mean >= THROTTLE_EVIDENCE_FROM and s.throttled_share is not None
    ]
    figure = f"highest 5 s utilization {peak:.0%} of the limit"
    if at_limit:
        figure += f"; throttled in {min(at_limit):.0%}-{max(at_limit):.0%} of CFS periods at the limit"
    broken = [(c, finding) for c in configs if (finding := limit_enforced(c.steps)) is not None]
    if broken:
        where = ", ".join(c.label for c, _ in broken)
        return Conclusion(
            f"The CPU limit was not enforced ({where}): no knee there counts.", f"{figure}; {broken[0][1].detail}"
        )
    if not at_limit:
        return Conclusion(
            f"Envoy never ran at {THROTTLE_EVIDENCE_FROM:.0%} of its limit, so the run cannot show the limit binds.",
            figure,
        )
    return Conclusion(
        f"Envoy's CPU limit was enforced: never more than {LIMIT_OVERSHOOT:.0%} over it, and throttled at it.", figure
    )


def conclusions(summary: RunSummary, fit: Fit | None, points: Sequence[KneePoint]) -> list[Conclusion]:
    """The run's findings, most important first; each backed by the figure it carries."""
    threshold = summary.threshold
    configs = [c for c in summary.configs if c.steps]
    steps = [s for c in configs for s in c.steps]
    found: list[Conclusion | None] = [_knee_status(summary, threshold), _knee_trust(configs)]
    found += [_plateau_and_headroom(configs, threshold), _arrival_models(configs)]
    if fit is not None:
        found += [_linearity(fit), _scaling(fit)]
    elif len(points) == 1:
        point = points[0]
        found.append(
            Conclusion(
                f"One knee: {point.rps_per_core:,.0f} RPS per core at {fmt.cpu(point.cpu_cores)}; sweep a second CPU "
                "limit for a sizing rule.",
                f"knee {point.rps:,.0f} RPS at {fmt.cpu(point.cpu_cores)}",
                "knee_vs_cores",
            )
        )
    found += [_baseline(summary), _latency(configs, threshold), _failures(steps), _agreement(steps, threshold)]
    found.append(_generator(steps))
    found.append(_memory(configs))
    found.append(_limit_enforced(configs))
    found.append(_machine_speed(configs))
    return [c for c in found if c is not None]

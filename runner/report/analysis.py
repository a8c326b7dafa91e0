"""What the numbers say, pure: the run's conclusions, read off the report's rows (runner.report.rows) and its
headline figures (runner.report.headline), never recomputed; a guard's verdict is the one the run recorded with
each step (limit_enforced reads the recorded windows as the run's verdict did, runner.guards.judge).

Every sentence carries the figure behind it; where the data cannot back a claim (too few knees, no latency, no
generator CPU) the claim is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.guards import (
    GENERATOR_CPU_LIMIT,
    LIMIT_OVERSHOOT,
    RPS_MISMATCH,
    RPS_MISMATCH_LIMIT,
    THROTTLE_EVIDENCE_FROM,
    limit_enforced,
)
from runner.model import RunSummary, Step
from runner.quantities import parse_memory
from runner.report import formatting as fmt
from runner.report.headline import Headline
from runner.report.rows import LATENCY_RISE_FACTOR, ConfigRow, latency_rose

__all__ = ["Conclusion", "conclusions"]

MEMORY_NOTABLE = 0.8  # working set over this share of the limit is worth a warning
SPEED_NOTABLE = 0.05  # the machine's speed moving more than this between configurations is worth a word


@dataclass(frozen=True)
class Conclusion:
    """One finding: the sentence, the figures that back it, and the plot that shows it (if any)."""

    text: str
    figure: str
    plot: str | None = None


def _name(row: ConfigRow, rows: Sequence[ConfigRow]) -> str:
    """ "500m", with the profile and the arrival model when the run measured several."""
    parts = [fmt.cpu(row.cpu_cores)]
    parts += [row.profile] if len({r.profile for r in rows}) > 1 else []
    parts += [f"{row.config.arrivals} arrivals"] if len({r.config.arrivals for r in rows}) > 1 else []
    return " ".join(parts)


def _knee_status(rows: Sequence[ConfigRow], threshold: float) -> Conclusion | None:
    finished = [r for r in rows if r.config.status != "running"]
    if not finished:
        return None
    valid = [r for r in finished if r.knee is not None]
    if len(valid) == len(finished):
        return Conclusion(
            f"Every configuration reached the {threshold:.0%} CPU knee, so each has a sizing figure.",
            f"{len(valid)} of {len(finished)} configurations saturated",
        )
    others = "; ".join(
        f"{r.label}: {r.config.status}" + (f", {r.config.reason}" if r.config.reason else "")
        for r in finished
        if r.knee is None
    )
    return Conclusion(
        f"{len(finished) - len(valid)} configuration(s) have no valid knee and are left out of the sizing.",
        f"{len(valid)} of {len(finished)} saturated; {others}",
    )


def _knee_trust(rows: Sequence[ConfigRow]) -> Conclusion | None:
    """How well the knees are known: their 95% intervals, where each comes from, and which have none."""
    knees = [(r, r.knee) for r in rows if r.knee is not None]
    if not knees:
        return None
    figure = "; ".join(
        f"{_name(r, rows)}: {k.rps:,.0f} RPS, {fmt.knee_from(k)}"
        + (f" (+-{k.half_width:.1%})" if k.half_width is not None else "")
        for r, k in knees
    )
    widths = [k.half_width for _, k in knees if k.half_width is not None]
    if len(widths) == len(knees):
        rounds = all(k.method == "rounds" for _, k in knees)
        source = (
            "from the scatter between interleaved rounds, so the machine's drift during the run is inside it"
            if rounds
            else "from the windows' scatter in one pass, which does not hold the machine's drift"
        )
        return Conclusion(f"Each knee is known to within +-{max(widths):.1%} (95% confidence, {source}).", figure)
    unsure = [_name(r, rows) for r, k in knees if k.half_width is None]
    which = f"The knee at {unsure[0]} has" if len(unsure) == 1 else f"The knees at {', '.join(unsure)} have"
    return Conclusion(
        f"{which} no confidence interval (see where each comes from): treat them as rough, and size from capacity "
        "or a run with interleaved rounds.",
        figure,
    )


def _capacity_against_knee(rows: Sequence[ConfigRow], threshold: float) -> list[Conclusion]:
    """Where Envoy broke against where its CPU reached the threshold: above the knee it leaves headroom; below
    it, latency broke first and the capacity is the figure to size from."""
    pairs = [(r, r.config.capacity_over_knee) for r in rows]
    pairs_known = [(r, margin) for r, margin in pairs if margin is not None and r.knee and r.capacity]

    def figure(members: Sequence[tuple[ConfigRow, float]]) -> str:
        return "; ".join(
            f"{_name(r, rows)}: knee {fmt.rps(r.knee.rps if r.knee else None)}, capacity "
            f"{fmt.rps(r.capacity.rps if r.capacity else None)} ({margin:+.0%})"
            + (f", utilization ~ RPS^{r.knee.exponent:.2f}" if r.knee and r.knee.exponent is not None else "")
            for r, margin in members
        )

    found = []
    below = [(r, m) for r, m in pairs_known if m < 0]
    above = [(r, m) for r, m in pairs_known if m >= 0]
    if below:
        where = ", ".join(_name(r, rows) for r, _ in below)
        found.append(
            Conclusion(
                f"At {where} latency broke before Envoy's CPU reached {threshold:.0%}: its capacity lies below the "
                "knee, so size from the capacity there, not from the knee.",
                figure(below),
                "cost_vs_rps",
            )
        )
    if above:
        margins = [m for _, m in above]
        flat = [_name(r, rows) for r, _ in above if r.knee and r.knee.plateau]
        if flat:
            text = (
                f"At {', '.join(flat)} utilization stays near {threshold:.0%} over a wide range of load: the knee is "
                f"not sharp there; Envoy still served {min(margins):.0%}-{max(margins):.0%} more at capacity, the "
                "sharper figure."
            )
        else:
            text = (
                f"Envoy served {min(margins):.0%}-{max(margins):.0%} more than the knee before it broke: its CPU per "
                f"request falls as load rises, so the {threshold:.0%} knee leaves headroom."
            )
        found.append(Conclusion(text, figure(above), "cost_vs_rps"))
    return found


def _ratios(headline: Headline) -> list[Conclusion]:
    """How the knee grows with the CPU limit, and the ratios between profiles and arrival models."""
    found = []
    series = headline.series
    if series is not None and len(series.rates) > 1:
        found.append(Conclusion(headline.scaling, series.scaling.figure, "knee_per_core"))
    for ratio in headline.ratios:
        found.append(Conclusion(f"{ratio.label}: {ratio.text}.", ratio.compared))
    return found


def _latency(rows: Sequence[ConfigRow], threshold: float) -> Conclusion | None:
    figures, rose, jumped = [], [], []
    for row in rows:
        steps = [s.step for s in row.steps if s.step.p95_ms is not None]
        below = [s.p95_ms for s in steps if s.p95_ms is not None and s.cpu_utilization_mean < threshold]
        above = [s.p95_ms for s in steps if s.p95_ms is not None and s.cpu_utilization_mean >= threshold]
        if below and above:
            name = _name(row, rows)
            figures.append(f"{name}: {max(below):.0f} ms -> {max(above):.0f} ms")
            rose.append(latency_rose(max(below), max(above)))
            jumped += [name] if rose[-1] else []
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
    """Did Locust and Envoy count the same load? As the run's own rps-mismatch guard judged each step (its
    finding is recorded with the step, judged at the run's scrape interval): below the threshold (a throttled
    Envoy is scraped late), against what chance allows in its window."""
    judged = [s for s in steps if s.envoy_rps and s.rps > 0 and s.cpu_utilization_mean < threshold]
    if not judged:
        return None

    def gap(step: Step) -> float:
        return abs(step.envoy_rps - step.rps) / step.rps

    worst = max(gap(s) for s in judged)
    figure = f"largest difference {worst:.1%} over {len(judged)} steps below the threshold"
    beyond = [s for s in judged if any(f.guard == RPS_MISMATCH for f in s.guards)]
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
        f"Through Envoy ({fmt.cpu(measured.envoy_cpu_cores)} CPU) nginx served {measured.gateway_share:.0%} of its "
        "direct throughput with the same load.",
        f"direct {direct:,.0f} RPS, through Envoy {gateway:,.0f} RPS, {measured.users} closed-loop users",
    )


def _memory_limit(row: ConfigRow) -> int | None:
    try:
        return parse_memory(row.config.envoy.memory)
    except ValueError:
        return None


def _memory(rows: Sequence[ConfigRow]) -> Conclusion | None:
    peaks = [(max((s.step.envoy_memory_bytes for s in r.steps), default=0.0), r) for r in rows]
    peaks = [(peak, r) for peak, r in peaks if peak > 0]
    if not peaks:
        return None
    peak, row = max(peaks, key=lambda pair: pair[0])
    limit = _memory_limit(row)
    share = f", {peak / limit:.0%} of its {row.config.envoy.memory} limit" if limit else ""
    figure = f"peak working set {fmt.mebibytes(peak)} ({row.label}){share}"
    if limit and peak / limit >= MEMORY_NOTABLE:
        return Conclusion("Envoy's memory came close to its limit: raise the memory limit before sizing CPU.", figure)
    return Conclusion("Memory does not constrain Envoy at these loads; CPU is the resource to size.", figure)


def _machine_speed(rows: Sequence[ConfigRow], moved: float | None) -> Conclusion | None:
    """How much the machine's own speed moved between configurations (a reference loop on Envoy's CPUs before
    each one's first window; the headline's figure)."""
    if moved is None:
        return None
    figure = "reference loop before each configuration: " + ", ".join(
        f"{_name(r, rows)} {r.config.machine_speed:.2f}M/s" for r in rows if r.config.machine_speed
    )
    if moved <= SPEED_NOTABLE:
        return Conclusion(f"The machine ran at a steady speed through the run (within {moved:.0%}).", figure)
    return Conclusion(
        f"The machine itself ran up to {moved:.0%} faster at one configuration than at another: knees measured "
        "on it can differ by as much for that reason alone (a virtual machine shares its host).",
        figure,
    )


def _limit_enforced(rows: Sequence[ConfigRow]) -> Conclusion | None:
    """The CPU limit held (guards.limit_enforced per configuration): Envoy never more than LIMIT_OVERSHOOT
    above it, and throttled where it ran at it."""
    steps = [s.step for r in rows for s in r.steps]
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
    broken = [(r, finding) for r in rows if (finding := limit_enforced([s.step for s in r.steps])) is not None]
    if broken:
        where = ", ".join(r.label for r, _ in broken)
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


def conclusions(summary: RunSummary, rows: Sequence[ConfigRow], headline: Headline) -> list[Conclusion]:
    """The run's findings, most important first; each backed by the figure it carries."""
    threshold = summary.threshold
    measured = [r for r in rows if r.steps]
    steps = [s.step for r in measured for s in r.steps]
    found: list[Conclusion | None] = [_knee_status(rows, threshold), _knee_trust(measured)]
    found += _capacity_against_knee(measured, threshold)
    found += _ratios(headline)
    found += [Conclusion(r.regimes.text, r.regimes.figure, "cost_vs_rps") for r in measured if r.regimes]
    found += [_baseline(summary), _latency(measured, threshold), _failures(steps), _agreement(steps, threshold)]
    found += [_generator(steps), _memory(measured), _limit_enforced(measured)]
    found.append(_machine_speed(measured, headline.speed_moved))
    return [c for c in found if c is not None]

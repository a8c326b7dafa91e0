"""The report's rows, built once from a run's summary, pure: each configuration with its windows, reading the
model's own figures (runner.model: the valid knee, capacity, knee per core, capacity over knee) rather than
copies of them, plus what only the report says: each window's analysis sentence and regime, and where a
configuration's windows ran throttled.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from runner.guards import FAIL_RATIO_LIMIT
from runner.model import THROTTLED_REGIME, Capacity, ConfigResult, Knee, RunSummary, Step
from runner.report import formatting as fmt

__all__ = [
    "ConfigRow",
    "EnvRow",
    "FixedLoad",
    "Regimes",
    "StepRow",
    "anchor",
    "build_rows",
    "step_analysis",
]

IDLE_BELOW = 0.75  # a step under this utilization leaves its CPU limit "not fully used"
LATENCY_RISE_FACTOR = 2.0  # p95 at least this many times the lightest step's is called a rise
LATENCY_RISE_MIN_MS = 5.0  # and at least this many ms more
NEAR_WINDOWS = 3  # steady windows nearest the first throttled one, to compare it with
COSTLIER = 0.05  # a throttled window this much above the cost curve costs more CPU per request


def latency_rose(before_ms: float, after_ms: float) -> bool:
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
    if lightest and p95 is not None and latency_rose(lightest, p95):
        text += f" p95 latency {p95 / lightest:.0f}x the lightest step's ({p95:.0f} ms vs {lightest:.0f} ms)."
    for guard in step.guards:
        text += f" Guard {guard.guard}: {guard.detail}."
    if step.fail_ratio > FAIL_RATIO_LIMIT:
        text += f" {step.fail_ratio:.1%} of requests failed."
    elif step.failures:
        text += f" {step.failures:,} failed request(s)."
    return text


@dataclass(frozen=True)
class EnvRow:
    """One line of the environment table, as the reference report writes it: object, role, description."""

    name: str
    role: str
    description: str


@dataclass(frozen=True)
class FixedLoad:
    """Envoy's CPU at one fixed offered load (search: fixed), per 1,000 RPS served."""

    label: str
    offered_rps: float
    rps: float
    envoy_cores: float
    utilization: float

    @property
    def cores_per_1k_rps(self) -> float:
        return self.envoy_cores / self.rps * 1000 if self.rps > 0 else 0.0


@dataclass(frozen=True)
class StepRow:
    """A window as the step tables show it: the step, its analysis sentence, whether it reached the threshold."""

    step: Step
    analysis: str
    at_limit: bool

    @property
    def number(self) -> int:
        return self.step.index + 1

    @property
    def cpu_range(self) -> str:
        return fmt.percent_range(self.step.cpu_utilization_min, self.step.cpu_utilization_max)

    @property
    def regime(self) -> str:
        """ "steady", "throttled 52%" (its share of CFS periods throttled), or "-" when not published."""
        if self.step.regime is None:
            return "-"
        return f"throttled {self.step.throttled_share:.0%}" if self.step.regime == "throttled" else "steady"

    @property
    def window(self) -> str:
        """ "round 2", "round 2, control", or "" for a run of one pass."""
        return f"round {self.step.round}" + (", control" if self.step.control else "")


def _span(values: Sequence[float], form: str) -> str:
    low, high = min(values), max(values)
    return format(low, form) if round(low) == round(high) else f"{low:{form}}-{high:{form}}"


@dataclass(frozen=True)
class Regimes:
    """Where a configuration's windows ran throttled (CFS throttling in THROTTLED_REGIME of the periods or
    more): the lowest such window against the steady windows offered nearest it (latency) and, with a fitted
    knee, against the knee's cost curve at its rate (CPU per request)."""

    label: str
    throttled: tuple[Step, ...]
    windows: int
    steady_near: tuple[Step, ...]
    curve_us: float | None  # CPU per request on the knee's power law at the first throttled window's rate

    @property
    def first(self) -> Step:
        return min(self.throttled, key=lambda s: (s.offered, s.index))

    def _cost_against(self) -> tuple[float, str] | None:
        """The first throttled window's CPU per request over the knee's curve (or the nearest steady windows'),
        less one, and what it was set against."""
        cost = self.first.cpu_per_request_us
        if cost is None:
            return None
        if self.curve_us is not None:
            return cost / self.curve_us - 1, "the knee's cost curve at that rate"
        costs = [s.cpu_per_request_us for s in self.steady_near if s.cpu_per_request_us is not None]
        return (cost / statistics.mean(costs) - 1, "the steady windows nearest it") if costs else None

    def _latency_rose(self) -> bool | None:
        steady = [s.p99_ms for s in self.steady_near if s.p99_ms is not None]
        p99 = self.first.p99_ms
        return latency_rose(max(steady), p99) if steady and p99 is not None else None

    def _meaning(self) -> str:
        against, rose = self._cost_against(), self._latency_rose()
        costlier = against is not None and against[0] >= COSTLIER
        if rose and costlier:
            return (
                "Two regimes of Envoy under a CFS quota: throttled, a request costs more CPU and much more latency; "
                "such windows mark where Envoy breaks, not what a request costs."
            )
        if rose:
            return "Throttled, Envoy kept its CPU per request but not its latency: the quota says where it breaks."
        if rose is False:
            return "The throttling came in bursts at an ordinary latency: no sign of breaking there."
        return "Throttled windows mark where Envoy works against its quota."

    @property
    def text(self) -> str:
        """The conclusion: latency and cost in the throttled regime against the steady one, and what that says."""
        first, near = self.first, self.steady_near
        latency = f"p99 {fmt.ms(first.p99_ms)}"
        steady_p99 = [s.p99_ms for s in near if s.p99_ms is not None]
        if steady_p99:
            latency += f" against {_span(steady_p99, ',.0f')} ms in the steady windows nearest it"
        cost, against = first.cpu_per_request_us, self._cost_against()
        if cost is not None:
            latency += f", {cost:,.0f} \u00b5s of CPU per request"
        if against is not None:
            more, base = against
            side = "on" if round(abs(more) * 100) == 0 else f"{abs(more):.0%} {'above' if more >= 0 else 'below'}"
            latency += f": {side} {base}"
        return (
            f"{self.label}: {len(self.throttled)} of {self.windows} windows ran throttled; the lowest, at "
            f"{fmt.rps(first.offered)} RPS offered, had {latency}. {self._meaning()}"
        )

    @property
    def summary(self) -> str:
        """ "2 of 14 windows ran throttled, the lowest at 1,300 RPS offered" (the conclusion says more)."""
        first = self.first
        return (
            f"{len(self.throttled)} of {self.windows} windows ran throttled, the lowest at {fmt.rps(first.offered)} "
            f"RPS offered ({first.throttled_share or 0:.0%} of CFS periods throttled)"
        )

    @property
    def figure(self) -> str:
        first, near = self.first, self.steady_near
        text = (
            f"throttled in {first.throttled_share or 0:.0%} of CFS periods at {fmt.rps(first.offered)} RPS "
            f"(a window counts as throttled from {THROTTLED_REGIME:.0%})"
        )
        if near:
            text += (
                f"; steady windows at {_span([s.offered for s in near], ',.0f')} RPS: "
                f"{_span([s.cpu_per_request_us or 0 for s in near], ',.0f')} \u00b5s per request, "
                f"p99 {_span([s.p99_ms or 0 for s in near], ',.0f')} ms"
            )
        return text


def cost_on_curve_us(config: ConfigResult, rps: float, threshold: float) -> float | None:
    """Envoy's CPU per request at `rps` on the valid knee's power law (utilization = threshold x
    (rps / knee)^exponent); None without a fitted knee."""
    knee = config.valid_knee
    if knee is None or knee.exponent is None or rps <= 0:
        return None
    utilization = threshold * (rps / knee.rps) ** knee.exponent
    return utilization * config.envoy.cpu_cores / rps * 1e6


def regimes(config: ConfigResult, threshold: float) -> Regimes | None:
    """The configuration's throttled windows against steady ones, when any window ran throttled."""
    steps = config.steps
    throttled = tuple(s for s in steps if s.regime == "throttled")
    if not throttled:
        return None
    first = min(throttled, key=lambda s: (s.offered, s.index))
    steady = sorted((s for s in steps if s.regime == "steady"), key=lambda s: abs(s.offered - first.offered))
    near = tuple(sorted(steady[:NEAR_WINDOWS], key=lambda s: s.offered))
    return Regimes(config.label, throttled, len(steps), near, cost_on_curve_us(config, first.rps, threshold))


def anchor(config: ConfigResult) -> str:
    """The HTML anchor of a configuration's section."""
    return "config-" + re.sub(r"[^a-z0-9]+", "-", config.key.lower()).strip("-")


@dataclass(frozen=True)
class ConfigRow:
    """One configuration as the report shows it: the result itself (its figures are the model's), its anchor,
    what its clients asked for, and its windows ordered by offered load."""

    config: ConfigResult
    threshold: float
    compression: str
    steps: tuple[StepRow, ...]
    regimes: Regimes | None

    @property
    def anchor(self) -> str:
        return anchor(self.config)

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def cpu_cores(self) -> float:
        return self.config.envoy.cpu_cores

    @property
    def profile(self) -> str:
        return self.config.profile.name

    @property
    def knee(self) -> Knee | None:
        """The knee when it counts (the configuration ended saturated)."""
        return self.config.valid_knee

    @property
    def capacity(self) -> Capacity | None:
        return self.config.capacity if self.config.status != "failed" else None

    @property
    def contour(self) -> str:
        contour = self.config.contour
        if contour is None or contour.cpu_cores is None:
            return "-"
        return f"{fmt.cpu(contour.cpu_cores)} CPU / {contour.memory or '-'}"

    @property
    def cpu_per_request_us(self) -> float | None:
        """Envoy's CPU per request at the knee."""
        return self.config.knee_cpu_per_request_us(self.threshold)

    @property
    def rounds(self) -> int:
        return len({s.step.round for s in self.steps})

    @property
    def headline(self) -> str:
        """ "Status saturated; knee 1,190 RPS, 4,760 per core (95% CI ...), 189 µs of Envoy CPU per request;
        capacity 1,280 RPS (broke at 1,330: ...)." """
        text = f"Status {self.config.status}"
        knee = self.knee
        if knee is not None:
            text += (
                f"; knee {fmt.knee_text(knee, self.cpu_cores)}, {self.cpu_per_request_us:,.0f} \u00b5s of Envoy CPU "
            )
            text += "per request"
        if self.capacity is not None:
            text += f"; capacity {fmt.capacity_text(self.capacity)}"
        if self.config.reason:
            text += f": {self.config.reason}"
        return text + "."


def build_rows(summary: RunSummary) -> tuple[ConfigRow, ...]:
    """Every configuration of the run, in its order."""
    rows = []
    for config in summary.configs:
        steps = sorted(config.steps, key=lambda s: (s.offered, s.index))
        step_rows = tuple(
            StepRow(s, step_analysis(s, steps, summary.threshold), s.cpu_utilization_mean >= summary.threshold)
            for s in steps
        )
        compression = fmt.compression(config.accept_encoding)
        rows.append(ConfigRow(config, summary.threshold, compression, step_rows, regimes(config, summary.threshold)))
    return tuple(rows)

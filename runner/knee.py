"""The knee and the capacity of one configuration, from its measured windows. Pure.

The knee is the RPS at which Envoy's CPU utilization reaches the threshold. Envoy's CPU per request
falls as load rises (its event loop batches more work per wake-up), so utilization is not proportional
to RPS and a line through two windows misplaces the crossing. The knee comes from a power law,
utilization = c x RPS^b (b < 1 when the cost per request falls), fitted by least squares in log-log
space to the windows around the threshold. Its 95% confidence interval is the inverse-regression
(Fieller) interval: the RPS range over which the fitted mean utilization cannot be told apart from the
threshold, given the windows' scatter. With fewer windows than a fit needs, the knee is interpolated
between the two windows that bracket the threshold, and has no interval.

The capacity is where it breaks: the highest offered rate served in full (within the delivery
tolerance), with p99 latency under the SLO and failures under the guard's limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runner.guards import FAIL_RATIO_LIMIT, GENERATOR_CPU_LIMIT
from runner.model import Capacity, Knee, Step

CONFIDENCE = 0.95
FIT_FLOOR = 0.5  # windows below this share of the threshold say little about the curve near it
LOCAL_FLOOR = 0.75  # ... and once LOCAL_WINDOWS windows lie above this share, only those are fitted
LOCAL_WINDOWS = 4
SATURATED = 0.98  # at or above this utilization a window is at the cap: clipped, left out of the fit
MIN_FIT_WINDOWS = 3
DELIVERY_TOLERANCE = 0.02  # a window serves its offered rate when it delivers at least 98% of it
PLATEAU_EXPONENT = 0.35  # utilization ~ RPS^b with b below this: flat near the threshold, not a sharp knee
EXTRAPOLATION = 0.10  # a fitted knee may lie this far beyond the rates measured, no further


@dataclass(frozen=True)
class PowerFit:
    """log(utilization) = intercept + exponent x log(RPS), by least squares over `n` windows."""

    intercept: float
    exponent: float
    n: int
    residual_sd: float
    mean_log_rps: float
    sxx: float
    rps_range: tuple[float, float]

    def utilization_at(self, rps: float) -> float:
        return math.exp(self.intercept + self.exponent * math.log(rps))

    def rps_at(self, utilization: float) -> float:
        return math.exp((math.log(utilization) - self.intercept) / self.exponent)

    def interval(self, utilization: float, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        """The RPS interval in which the mean utilization reaches `utilization` (Fieller's inverse
        regression); None when the windows cannot bound it (too few, or a slope not told from zero)."""
        dof = self.n - 2
        if dof < 1 or self.exponent <= 0 or self.sxx <= 0:
            return None
        t = float(stats.t.ppf(0.5 + confidence / 2, dof))
        g = (t * self.residual_sd / self.exponent) ** 2 / self.sxx
        if g >= 1:
            return None
        x0 = (math.log(utilization) - self.intercept) / self.exponent
        offset = x0 - self.mean_log_rps
        spread = (t * self.residual_sd / self.exponent) * math.sqrt(offset**2 / self.sxx + (1 - g) / self.n)
        low = math.exp(self.mean_log_rps + (offset - spread) / (1 - g))
        high = math.exp(self.mean_log_rps + (offset + spread) / (1 - g))
        if low < self.rps_range[0] * (1 - EXTRAPOLATION) or high > self.rps_range[1] * (1 + EXTRAPOLATION):
            return None  # the interval reaches far past the rates measured: it bounds nothing useful
        return low, high


@dataclass(frozen=True)
class KneeResult:
    """The knee (None with a reason when the windows do not place one), the fit it came from (None when
    interpolated) and the windows that bracket it (for an interpolated knee)."""

    knee: Knee | None
    reason: str | None
    bracket: tuple[Step, Step] | None = None
    fit: PowerFit | None = None

    @property
    def judged_up_to(self) -> float | None:
        """The RPS up to which a guard that fired makes the knee invalid: the upper end of the knee's
        interval; without an interval, the window above the knee (or the knee itself when none is above)."""
        if self.knee is None:
            return None
        if self.knee.high is not None:
            return self.knee.high
        return max(self.knee.rps, self.bracket[1].rps) if self.bracket is not None else self.knee.rps


def served_in_full(step: Step, tolerance: float = DELIVERY_TOLERANCE) -> bool:
    """The window delivered its offered rate (closed-loop windows offer no rate: always true)."""
    return step.target_rps is None or step.rps >= (1 - tolerance) * step.target_rps


def bracket(steps: Sequence[Step], threshold: float) -> tuple[Step, Step] | None:
    """The lowest-offered step at or above the threshold and the nearest-below step offered less."""
    ordered = sorted(steps, key=lambda s: (s.offered, s.index))
    above = next((s for s in ordered if s.cpu_utilization_mean >= threshold), None)
    if above is None:
        return None
    lower = [s for s in ordered if s.offered < above.offered and s.cpu_utilization_mean < threshold]
    if not lower:
        return None
    below = max(lower, key=lambda s: (s.cpu_utilization_mean, s.offered))
    return below, above


def fit_windows(steps: Sequence[Step], threshold: float) -> list[Step]:
    """The windows a fit may use: clean (no guard), served in full, between FIT_FLOOR of the threshold and
    SATURATED; only the ones near the threshold once there are LOCAL_WINDOWS of them."""
    usable = [
        s
        for s in steps
        if not s.guards
        and s.rps > 0
        and served_in_full(s)
        and FIT_FLOOR * threshold <= s.cpu_utilization_mean < SATURATED
    ]
    local = [s for s in usable if s.cpu_utilization_mean >= LOCAL_FLOOR * threshold]
    return local if len(local) >= LOCAL_WINDOWS else usable


def power_fit(points: Sequence[tuple[float, float]]) -> PowerFit | None:
    """The least-squares power law through (RPS, utilization) points; None for fewer than two distinct rates."""
    if len(points) < 2:
        return None
    x = np.log([rps for rps, _ in points])
    y = np.log([utilization for _, utilization in points])
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 1e-12:
        return None
    exponent = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - exponent * x.mean())
    residuals = y - (intercept + exponent * x)
    dof = len(points) - 2
    sd = float(math.sqrt((residuals**2).sum() / dof)) if dof > 0 else math.inf
    rates = [rps for rps, _ in points]
    return PowerFit(intercept, exponent, len(points), sd, float(x.mean()), sxx, (min(rates), max(rates)))


def window_points(steps: Sequence[Step]) -> list[tuple[float, float]]:
    return [(s.rps, s.cpu_utilization_mean) for s in steps]


def _no_knee(steps: Sequence[Step], threshold: float) -> KneeResult:
    peak = max(steps, key=lambda s: s.cpu_utilization_mean)
    if peak.cpu_utilization_mean < threshold:
        return KneeResult(
            None,
            f"utilization peaked at {peak.cpu_utilization_mean:.0%} at {peak.rps:,.0f} RPS, below the "
            f"{threshold:.0%} threshold: offer more load (more users or Locust workers)",
        )
    return KneeResult(None, f"the lowest load already reached {peak.cpu_utilization_mean:.0%}: start the search lower")


def _interpolated(below: Step, above: Step, threshold: float) -> Knee:
    span = above.cpu_utilization_mean - below.cpu_utilization_mean
    weight = (threshold - below.cpu_utilization_mean) / span if span > 0 else 1.0
    return Knee(
        rps=below.rps + weight * (above.rps - below.rps),
        users=round(below.users + weight * (above.users - below.users), 1),
        method="interpolated",
        windows=2,
    )


def find_knee(steps: Sequence[Step], threshold: float) -> KneeResult:
    """The knee: from a power-law fit with its confidence interval when the windows allow one and it crosses
    the threshold within the rates measured; else interpolated between the bracketing windows; None with
    the reason when the windows never cross the threshold."""
    if not steps:
        return KneeResult(None, "no step was measured")
    if all(s.cpu_utilization_mean < threshold for s in steps) or all(
        s.cpu_utilization_mean >= threshold for s in steps
    ):
        return _no_knee(steps, threshold)
    windows = fit_windows(steps, threshold)
    fit = power_fit(window_points(windows)) if len(windows) >= MIN_FIT_WINDOWS else None
    if fit is not None and fit.exponent > 0:
        rps = fit.rps_at(threshold)
        low, high = fit.rps_range  # the windows fitted, not every window: a fit says nothing past its data
        if low * (1 - EXTRAPOLATION) <= rps <= high * (1 + EXTRAPOLATION):
            return KneeResult(_fitted(steps, fit, rps, threshold), None, bracket(steps, threshold), fit)
    pair = bracket(steps, threshold)
    if pair is None:
        return KneeResult(
            None, "the windows cross the threshold only out of order (noise): measure more windows near it"
        )
    return KneeResult(_interpolated(*pair, threshold), None, pair)


def _fitted(steps: Sequence[Step], fit: PowerFit, rps: float, threshold: float) -> Knee:
    interval = fit.interval(threshold)
    by_rate = sorted(steps, key=lambda s: s.rps)
    below = [s for s in by_rate if s.rps <= rps]
    above = [s for s in by_rate if s.rps > rps]
    users: float = float((below or above)[-1 if below else 0].users)
    if below and above and above[0].rps > below[-1].rps:
        share = (rps - below[-1].rps) / (above[0].rps - below[-1].rps)
        users = below[-1].users + share * (above[0].users - below[-1].users)
    return Knee(
        rps=rps,
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
        users=round(users, 1),
        method="power-fit",
        windows=fit.n,
        exponent=fit.exponent,
    )


def serves(step: Step, slo_ms: float) -> bool | None:
    """Whether Envoy served this window: the offered rate delivered, p99 under the SLO, failures low.
    None when the window cannot tell (closed loop, or a generator that could not offer the load)."""
    if step.target_rps is None or step.generator_cpu_max >= GENERATOR_CPU_LIMIT:
        return None
    return (
        served_in_full(step) and (step.p99_ms is None or step.p99_ms <= slo_ms) and step.fail_ratio <= FAIL_RATIO_LIMIT
    )


def _broken_by(step: Step, slo_ms: float) -> str:
    if not served_in_full(step):
        return f"delivered {step.rps:,.0f} of {step.offered:,.0f} offered RPS ({step.rps / step.offered:.0%})"
    if step.p99_ms is not None and step.p99_ms > slo_ms:
        return f"p99 {step.p99_ms:,.0f} ms at {step.offered:,.0f} RPS, over the {slo_ms:,.0f} ms SLO"
    return f"{step.fail_ratio:.1%} of requests failed at {step.offered:,.0f} RPS"


def find_capacity(steps: Sequence[Step], slo_ms: float, above: float | None = None) -> Capacity | None:
    """The highest offered rate served below the lowest one that broke; None when none was served. With
    `above` (the knee), a window offered less that broke is a transient, not where Envoy breaks."""
    judged = [(s, ok) for s in steps if (ok := serves(s, slo_ms)) is not None]
    broken = [s for s, ok in judged if not ok and (above is None or s.offered >= above)]
    first_broken = min(broken, key=lambda s: s.offered) if broken else None
    limit = first_broken.offered if first_broken else math.inf
    served = [s for s, ok in judged if ok and s.offered < limit]
    if not served:
        return None
    best = max(served, key=lambda s: s.offered)
    if first_broken is None:
        return Capacity(rps=best.offered)
    return Capacity(rps=best.offered, broken_at=first_broken.offered, broken_by=_broken_by(first_broken, slo_ms))

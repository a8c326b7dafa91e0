"""Envoy's utilization against the rate it serves: power laws fitted in log-log space. Pure.

Envoy's CPU per request falls as load rises (its event loop batches more work per wake-up), so utilization
grows as RPS^b with b below 1, and a line through two windows misplaces where it crosses a threshold.

- `PowerFit`: one power law through a set of windows, with Fieller's inverse-regression interval for the
  rate at which the mean utilization reaches a level. Its interval comes from the scatter between windows
  measured one after another, so it knows nothing of a machine whose speed drifts between them.
- `RoundsFit`: the windows of several interleaved rounds, one exponent for all of them and an intercept per
  round: log(utilization) = a_round + b x log(RPS). A round's intercept is the machine's speed while it ran
  (a drift moves the whole curve), the exponent is Envoy's (how its cost per request falls with load). Each
  round gives its own crossing; the run's is their geometric mean, and its interval comes from the scatter
  between rounds (`jackknife`), so drift during the run is inside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
EXTRAPOLATION = 0.10  # a crossing may lie this far beyond the rates measured, no further ...
ROUNDS_EXTRAPOLATION = 0.25  # ... or this far for a rounds fit, whose interval carries its exponent's uncertainty
MIN_ROUNDS = 3  # an interval from the scatter between rounds needs at least this many (2 degrees of freedom)


def student_t(dof: int, confidence: float = CONFIDENCE) -> float:
    """Student's t quantile of a two-sided `confidence` interval with `dof` degrees of freedom."""
    return float(stats.t.ppf(0.5 + confidence / 2, dof))


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
        t = student_t(dof, confidence)
        g = (t * self.residual_sd / self.exponent) ** 2 / self.sxx
        if g >= 1:
            return None
        x0 = (math.log(utilization) - self.intercept) / self.exponent
        offset = x0 - self.mean_log_rps
        spread = (t * self.residual_sd / self.exponent) * math.sqrt(offset**2 / self.sxx + (1 - g) / self.n)
        log_low = self.mean_log_rps + (offset - spread) / (1 - g)
        log_high = self.mean_log_rps + (offset + spread) / (1 - g)
        lowest, highest = self.rps_range[0] * (1 - EXTRAPOLATION), self.rps_range[1] * (1 + EXTRAPOLATION)
        if log_low < math.log(lowest) or log_high > math.log(highest):
            return None  # it reaches far past the rates measured (with g near 1, past any float): it bounds nothing
        return math.exp(log_low), math.exp(log_high)


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


@dataclass(frozen=True)
class RoundPoint:
    """One window as the rounds fit sees it: its round, the RPS Envoy served and its utilization."""

    round: int
    rps: float
    utilization: float


@dataclass(frozen=True)
class RoundsFit:
    """log(utilization) = intercepts[round] + exponent x log(RPS) over `n` windows of `len(intercepts)` rounds."""

    exponent: float
    intercepts: dict[int, float]
    n: int
    rps_range: tuple[float, float]

    def rps_at(self, utilization: float, round_: int | None = None) -> float:
        """Where the curve of `round_` (None: of the run, the rounds' mean intercept) reaches `utilization`."""
        intercept = self.intercepts[round_] if round_ is not None else self.mean_intercept
        return math.exp((math.log(utilization) - intercept) / self.exponent)

    @property
    def mean_intercept(self) -> float:
        return sum(self.intercepts.values()) / len(self.intercepts)

    def crossings(self, utilization: float) -> dict[int, float]:
        """Each round's rate at `utilization`."""
        return {r: self.rps_at(utilization, r) for r in self.intercepts}


def rounds_fit(points: Sequence[RoundPoint], exponent: float | None = None) -> RoundsFit | None:
    """The fixed-effects power law: the exponent from how utilization moves with RPS inside each round (or the
    one given), an intercept per round. None when no round has two distinct rates, or utilization does not
    rise with RPS."""
    by_round: dict[int, list[RoundPoint]] = {}
    for point in points:
        by_round.setdefault(point.round, []).append(point)
    sxy = sxx = 0.0
    centres: dict[int, tuple[float, float]] = {}
    for round_, members in by_round.items():
        x = np.log([p.rps for p in members])
        y = np.log([p.utilization for p in members])
        centres[round_] = (float(x.mean()), float(y.mean()))
        sxx += float(((x - x.mean()) ** 2).sum())
        sxy += float(((x - x.mean()) * (y - y.mean())).sum())
    if exponent is None:
        if sxx <= 1e-12 or sxy <= 0:
            return None
        exponent = sxy / sxx
    intercepts = {r: y_mean - exponent * x_mean for r, (x_mean, y_mean) in sorted(centres.items())}
    rates = [p.rps for p in points]
    return RoundsFit(exponent, intercepts, len(points), (min(rates), max(rates)))


@dataclass(frozen=True)
class Estimate:
    """A figure from R rounds and its interval from the scatter between them (delete-one-round jackknife,
    Student's t with R - 1 degrees of freedom, in logs: the figure is a rate or a ratio of rates)."""

    value: float
    low: float
    high: float
    rounds: int

    @property
    def half_width(self) -> float:
        """The interval's larger side as a share of the value (0.03 = +-3%)."""
        return max(self.value - self.low, self.high - self.value) / self.value


def jackknife(
    rounds: Sequence[int], statistic: Callable[[Sequence[int]], float | None], confidence: float = CONFIDENCE
) -> Estimate | None:
    """`statistic` (a positive figure computed from the windows of the given rounds) with its interval: the
    jackknife's standard error of its logarithm over `rounds`, Student's t with len(rounds) - 1 degrees of
    freedom. For a mean over rounds the jackknife's error is exactly the textbook s / sqrt(R); for a fit it
    also carries what each round adds to the shared exponent. None with fewer than MIN_ROUNDS rounds or when
    a figure cannot be computed without one of them."""
    if len(rounds) < MIN_ROUNDS:
        return None
    whole = statistic(rounds)
    if whole is None or whole <= 0:
        return None
    leave_one_out = []
    for left_out in rounds:
        value = statistic([r for r in rounds if r != left_out])
        if value is None or value <= 0:
            return None
        leave_one_out.append(math.log(value))
    count = len(rounds)
    mean = sum(leave_one_out) / count
    error = math.sqrt((count - 1) / count * sum((v - mean) ** 2 for v in leave_one_out))
    t = student_t(count - 1, confidence)
    centre = math.log(whole)
    return Estimate(whole, math.exp(centre - t * error), math.exp(centre + t * error), count)


def rounds_to_reach(half_width: float, rounds: int, target: float, most: int) -> int | None:
    """The fewest rounds whose interval would narrow to +-`target`, if the scatter between rounds stays what it
    was over the `rounds` that gave +-`half_width`: the jackknife's error falls as 1/sqrt(R) and Student's t
    with R - 1 degrees of freedom falls with it. None when more than `most` rounds would be needed."""
    if half_width <= target:
        return rounds
    if rounds < MIN_ROUNDS:
        return None
    t = student_t(rounds - 1)
    error = math.log1p(half_width) / t * math.sqrt(rounds)  # one round's error, in logs (the larger side)
    for count in range(rounds + 1, most + 1):
        width = math.expm1(student_t(count - 1) * error / math.sqrt(count))
        if width <= target:
            return count
    return None

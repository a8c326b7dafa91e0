"""The knee of one configuration, from its measured windows. Pure.

The knee is the RPS at which Envoy's CPU utilization reaches the threshold, read off a power law of
utilization against RPS (runner.curve) fitted to the clean windows around the threshold that Envoy served in
full, in either regime (near the threshold a quota throttles bursts at an ordinary cost per request: see
fit_windows). Windows measured in several interleaved rounds give a knee per round and an interval from
the scatter between rounds, which holds the machine's drift during the run; windows of one pass give
Fieller's interval from their scatter, which does not. With fewer windows than a fit needs, the knee is
interpolated between the two windows that bracket the threshold, and has no interval.

The capacity (where it breaks) is runner.capacity's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import (
    EXTRAPOLATION,
    MIN_ROUNDS,
    ROUNDS_EXTRAPOLATION,
    PowerFit,
    RoundPoint,
    RoundsFit,
    jackknife,
    power_fit,
    rounds_fit,
)
from runner.model import Knee, Step

FIT_FLOOR = 0.5  # windows below this share of the threshold say little about the curve near it
LOCAL_FLOOR = 0.75  # ... and once LOCAL_WINDOWS windows of one pass lie above this share, only those are fitted
ROUNDS_FLOOR = 2 / 3  # windows of several rounds: those above this share (the planner's lever aims at 0.8 of it)
LOCAL_WINDOWS = 4
SATURATED = 0.98  # at or above this utilization a window is at the cap: clipped, left out of the fit
MIN_FIT_WINDOWS = 3
DELIVERY_TOLERANCE = 0.02  # a window serves its offered rate when it delivers at least 98% of it

__all__ = [
    "EXTRAPOLATION",
    "SATURATED",
    "KneeResult",
    "PowerFit",
    "RoundsFit",
    "find_knee",
    "fit_windows",
    "fits",
    "power_fit",
    "window_points",
]


@dataclass(frozen=True)
class KneeResult:
    """The knee (None with a reason when the windows do not place one), the fit it came from (None when
    interpolated) and the windows that bracket it (for an interpolated knee)."""

    knee: Knee | None
    reason: str | None
    bracket: tuple[Step, Step] | None = None
    fit: PowerFit | RoundsFit | None = None

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


def fits(step: Step, floor: float) -> bool:
    """Whether a fit may use `step`: clean (no guard), served in full, between `floor` and SATURATED."""
    return not step.guards and step.rps > 0 and served_in_full(step) and floor <= step.cpu_utilization_mean < SATURATED


def fit_windows(steps: Sequence[Step], threshold: float) -> list[Step]:
    """The windows a fit may use: clean (no guard), served in full, between FIT_FLOOR of the threshold and
    SATURATED; only the ones near the threshold (LOCAL_FLOOR) once there are LOCAL_WINDOWS of them, or when
    they come from several rounds. Near its limit Envoy's utilization is no power law of the rate over the
    whole range: on a 2-core VM under a 250m quota it rose slowly to ~0.75 and then jumped to ~0.9 within a
    rate 20% higher (Locust, 2026-11-25), so windows at half the threshold would bend the curve where it
    crosses. Windows in the throttled regime stay in: near the threshold a quota throttles bursts (20-40% of
    periods at 90% utilization), and the scatter they bring is the knee's own."""
    usable = [s for s in steps if fits(s, FIT_FLOOR * threshold)]
    if len({s.round for s in usable}) > 1:
        return [s for s in usable if s.cpu_utilization_mean >= ROUNDS_FLOOR * threshold]
    local = [s for s in usable if s.cpu_utilization_mean >= LOCAL_FLOOR * threshold]
    return local if len(local) >= LOCAL_WINDOWS else usable


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
    """The knee: from the rounds fit with the interval from the scatter between rounds when the windows come
    from two or more rounds; else from one power law with Fieller's interval; else interpolated between the
    bracketing windows; None with the reason when the windows never cross the threshold. A fitted knee must
    cross the threshold within EXTRAPOLATION of the rates it was fitted to."""
    if not steps:
        return KneeResult(None, "no step was measured")
    if all(s.cpu_utilization_mean < threshold for s in steps) or all(
        s.cpu_utilization_mean >= threshold for s in steps
    ):
        return _no_knee(steps, threshold)
    windows = fit_windows(steps, threshold)
    fitted = _rounds_knee(steps, windows, threshold) or _one_pass_knee(steps, windows, threshold)
    if fitted is not None:
        return fitted
    pair = bracket(steps, threshold)
    if pair is None:
        return KneeResult(
            None, "the windows cross the threshold only out of order (noise): measure more windows near it"
        )
    return KneeResult(_interpolated(*pair, threshold), None, pair)


def _within_fitted(rps: float, rps_range: tuple[float, float], extrapolation: float = EXTRAPOLATION) -> bool:
    low, high = rps_range  # the windows fitted, not every window: a fit says nothing past its data
    return low * (1 - extrapolation) <= rps <= high * (1 + extrapolation)


def _rounds_knee(steps: Sequence[Step], windows: Sequence[Step], threshold: float) -> KneeResult | None:
    """The knee of windows from two or more rounds: the rounds fit's crossing, with the jackknife interval
    over rounds when there are MIN_ROUNDS of them."""
    points = [RoundPoint(s.round, s.rps, s.cpu_utilization_mean) for s in windows]
    rounds = sorted({p.round for p in points})
    fit = rounds_fit(points) if len(rounds) > 1 and len(points) >= MIN_FIT_WINDOWS else None
    if fit is None or not _within_fitted(fit.rps_at(threshold), fit.rps_range, ROUNDS_EXTRAPOLATION):
        return None

    def knee_of(selected: Sequence[int]) -> float | None:
        chosen = [p for p in points if p.round in set(selected)]
        # without one round the others may not fix an exponent (each with one window): keep the run's then
        part = rounds_fit(chosen) or rounds_fit(chosen, exponent=fit.exponent)
        return part.rps_at(threshold) if part is not None else None

    rps = fit.rps_at(threshold)
    estimate = jackknife(rounds, knee_of) if len(rounds) >= MIN_ROUNDS else None
    knee = Knee(
        rps=rps,
        low=estimate.low if estimate else None,
        high=estimate.high if estimate else None,
        users=_users_at(steps, rps),
        method="rounds",
        windows=fit.n,
        exponent=fit.exponent,
        rounds=len(rounds),
    )
    return KneeResult(knee, None, bracket(steps, threshold), fit)


def _one_pass_knee(steps: Sequence[Step], windows: Sequence[Step], threshold: float) -> KneeResult | None:
    """The knee of one pass's windows: one power law, Fieller's interval from their scatter."""
    fit = power_fit(window_points(windows)) if len(windows) >= MIN_FIT_WINDOWS else None
    if fit is None or fit.exponent <= 0 or not _within_fitted(fit.rps_at(threshold), fit.rps_range):
        return None
    rps = fit.rps_at(threshold)
    interval = fit.interval(threshold)
    knee = Knee(
        rps=rps,
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
        users=_users_at(steps, rps),
        method="power-fit",
        windows=fit.n,
        exponent=fit.exponent,
    )
    return KneeResult(knee, None, bracket(steps, threshold), fit)


def _users_at(steps: Sequence[Step], rps: float) -> float:
    """Users at `rps`, interpolated between the windows either side (the reference report's unit)."""
    by_rate = sorted(steps, key=lambda s: s.rps)
    below = [s for s in by_rate if s.rps <= rps]
    above = [s for s in by_rate if s.rps > rps]
    users: float = float((below or above)[-1 if below else 0].users)
    if below and above and above[0].rps > below[-1].rps:
        share = (rps - below[-1].rps) / (above[0].rps - below[-1].rps)
        users = below[-1].users + share * (above[0].users - below[-1].users)
    return round(users, 1)

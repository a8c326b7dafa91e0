"""The knee: the RPS at which Envoy's CPU utilization first reaches the threshold. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.measure import Step


@dataclass(frozen=True)
class Knee:
    """Interpolated between the bracketing steps (`below`, `above` are step indexes)."""

    rps: float
    cpu_utilization: float
    users: float
    below: int
    above: int


@dataclass(frozen=True)
class KneeResult:
    knee: Knee | None
    reason: str | None


def _offered(step: Step) -> float:
    return step.target_rps if step.target_rps is not None else float(step.users)


def bracket(steps: Sequence[Step], threshold: float) -> tuple[Step, Step] | None:
    """The lowest-offered step at or above the threshold and the nearest-below step offered less."""
    ordered = sorted(steps, key=lambda s: (_offered(s), s.index))
    above = next((s for s in ordered if s.cpu_utilization_mean >= threshold), None)
    if above is None:
        return None
    lower = [s for s in ordered if _offered(s) < _offered(above) and s.cpu_utilization_mean < threshold]
    if not lower:
        return None
    below = max(lower, key=lambda s: (s.cpu_utilization_mean, _offered(s)))
    return below, above


def find_knee(steps: Sequence[Step], threshold: float) -> KneeResult:
    """The knee by linear interpolation of RPS and users on utilization between the bracketing steps."""
    if not steps:
        return KneeResult(None, "no step was measured")
    pair = bracket(steps, threshold)
    if pair is None:
        peak = max(steps, key=lambda s: s.cpu_utilization_mean)
        if peak.cpu_utilization_mean < threshold:
            return KneeResult(
                None,
                f"utilization peaked at {peak.cpu_utilization_mean:.0%} at {peak.rps:,.0f} RPS, below the "
                f"{threshold:.0%} threshold: offer more load (more users or Locust workers)",
            )
        return KneeResult(
            None,
            f"the lowest load already reached {peak.cpu_utilization_mean:.0%}: start the search lower",
        )
    below, above = pair
    span = above.cpu_utilization_mean - below.cpu_utilization_mean
    weight = (threshold - below.cpu_utilization_mean) / span if span > 0 else 1.0
    return KneeResult(
        Knee(
            rps=below.rps + weight * (above.rps - below.rps),
            cpu_utilization=threshold,
            users=round(below.users + weight * (above.users - below.users), 1),
            below=below.index,
            above=above.index,
        ),
        None,
    )

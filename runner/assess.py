"""A configuration's figures from its windows, decided in one place: the knee, the capacity and the verdict.

The engine assesses when a configuration ends, the live view after every window, the search to know where it
stands; each shows the same `Assessment`, so a knee the guards throw out is never shown as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.capacity import find_capacity
from runner.curve import MIN_ROUNDS, rounds_to_reach
from runner.fleet import pod_knee
from runner.guards import judge
from runner.knee import KneeResult, find_knee
from runner.model import Capacity, Knee, PodKnee, Step
from runner.scenario.limits import MAX_ROUND_COUNT
from runner.search import Targets

__all__ = ["Assessment", "assess", "knee_interval_text", "search_ending"]


@dataclass(frozen=True)
class Assessment:
    """The knee (kept for inspection even when a guard makes it invalid) and the knee per pod, the capacity and
    the verdict."""

    outcome: KneeResult
    capacity: Capacity | None
    status: str  # saturated, not-saturated or invalid (runner.model.ConfigStatus)
    reason: str | None
    pod_knee: PodKnee | None = None

    @property
    def knee(self) -> Knee | None:
        return self.outcome.knee

    @property
    def valid_knee(self) -> Knee | None:
        """The knee when it counts: Envoy was the bottleneck up to it."""
        return self.outcome.knee if self.status == "saturated" else None


def assess(steps: Sequence[Step], threshold: float, slo_ms: float) -> Assessment:
    """Knee, knee per pod, capacity and verdict of one configuration's windows."""
    outcome = find_knee(steps, threshold)
    status, reason = judge(steps, outcome.judged_up_to, outcome.reason)
    capacity = find_capacity(steps, slo_ms)
    return Assessment(outcome, capacity, status, reason, pod_knee(steps, threshold)[0])


def knee_interval_text(knee: Knee | None, target: float) -> str:
    """How far the knee's interval reached against its `target` half-width, and where it comes from (and, for a
    rounds knee wider than the target, how many rounds would reach it)."""
    if knee is None:
        return "no knee"
    if knee.method == "interpolated":
        return "knee interpolated between the 2 windows either side (no interval)"
    width = knee.half_width
    if knee.method == "rounds":
        source = f"from {knee.rounds} rounds"
        if width is None:
            return f"knee {source}, no interval (one from the scatter between rounds needs {MIN_ROUNDS})"
    else:
        source = "from one pass"
        if width is None:
            return f"knee fitted to {knee.windows} windows that scatter too much for an interval"
    verdict = "within" if width <= target else "wider than"
    more = _more_rounds(knee, width, target)
    return f"knee interval +-{width:.1%} {source}, {verdict} the +-{target:.0%} target{more}"


def _more_rounds(knee: Knee, width: float, target: float) -> str:
    """For a rounds knee wider than its target: how many rounds would reach the target at this run's scatter."""
    if knee.method != "rounds" or knee.rounds is None or width <= target:
        return ""
    needed = rounds_to_reach(width, knee.rounds, target, MAX_ROUND_COUNT)
    if needed is None:
        return f" (at this run's scatter more than {MAX_ROUND_COUNT} rounds would be needed)"
    return f" (at this run's scatter about {needed} rounds would reach it: load.max_rounds: {needed})"


def _capacity_part(capacity: Capacity | None) -> str:
    if capacity is None:
        return "no rate served within the SLO"
    if capacity.broken_at is None:
        return f"capacity not reached (served up to {capacity.rps:,.0f} RPS)"
    return f"capacity within {capacity.resolution or 0.0:.0%}"


def search_ending(assessment: Assessment, steps: Sequence[Step], targets: Targets, stopped: str | None = None) -> str:
    """How a configuration's search ended, for the results: what the knee's interval reached against its
    target, where capacity stands (open loop), why it stopped early, and how many windows it took."""
    parts = [knee_interval_text(assessment.knee, targets.interval)]
    if any(s.target_rps is not None for s in steps):
        parts.append(_capacity_part(assessment.capacity))
    if stopped:
        parts.insert(0, stopped)
    return f"{'; '.join(parts)} after {len(steps)} windows"

"""The capacity of one configuration: where Envoy breaks, from its measured windows. Pure.

A window serves when it delivered its offered rate (within runner.knee.DELIVERY_TOLERANCE), with p99 latency
under the SLO and failures under the guard's limit. The capacity is the highest offered rate served below the
lowest one that broke.

Every window that broke counts, also one offered below the knee: where latency breaks before Envoy's CPU
reaches the threshold (a tight SLO), those windows are the capacity. One is dropped as a transient only when
the windows say it was one, and the capacity lists each with why:
- its own round served two rates at least as high (the same visit, minutes apart: the machine, not Envoy's
  limit; one alone may be the noise, and then the break counts);
- or most of the other rounds served a rate at least as high, and fewer broke at a rate at most as high (the
  control window, at one rate in every round, that missed once in five).
(Until 2026-11 every window offered below the knee that broke was dropped, so an SLO that bound below the
knee never showed: the capacity read as the highest window served anywhere below the first break above the
knee.)

With three rounds or more, the capacity has an interval as the knee does (runner.curve.jackknife): the same
figure computed without each round in turn, Student's t over the scatter between rounds; it reaches up at least
to the lowest rate that broke, since the break lies somewhere between the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import MIN_ROUNDS, jackknife
from runner.guards import FAIL_RATIO_LIMIT, GENERATOR_CPU_LIMIT
from runner.knee import served_in_full
from runner.model import Capacity, Step

__all__ = ["SAME_ROUND_SERVED", "broken_by", "find_capacity", "serves"]

SAME_ROUND_SERVED = 2  # windows served at a rate at least as high in its own round that make a break a transient


def serves(step: Step, slo_ms: float) -> bool | None:
    """Whether Envoy served this window: the offered rate delivered, p99 under the SLO, failures low.
    None when the window cannot tell (closed loop, or a generator that could not offer the load)."""
    if step.target_rps is None or step.generator_cpu_max >= GENERATOR_CPU_LIMIT:
        return None
    return (
        served_in_full(step) and (step.p99_ms is None or step.p99_ms <= slo_ms) and step.fail_ratio <= FAIL_RATIO_LIMIT
    )


def broken_by(step: Step, slo_ms: float) -> str:
    """What broke in a window that did not serve."""
    if not served_in_full(step):
        return f"delivered {step.rps:,.0f} of {step.offered:,.0f} offered RPS ({step.rps / step.offered:.0%})"
    if step.p99_ms is not None and step.p99_ms > slo_ms:
        return f"p99 {step.p99_ms:,.0f} ms at {step.offered:,.0f} RPS, over the {slo_ms:,.0f} ms SLO"
    return f"{step.fail_ratio:.1%} of requests failed at {step.offered:,.0f} RPS"


@dataclass(frozen=True)
class _Judged:
    step: Step
    served: bool


@dataclass(frozen=True)
class _Bracket:
    """The highest window served below the lowest that broke (None: none), and the transients dropped."""

    served: Step | None
    broken: Step | None
    transients: tuple[str, ...]


def _transient(window: Step, judged: Sequence[_Judged], slo_ms: float) -> str | None:
    """Why a window that broke is a transient (see the module's docstring), or None when it counts."""
    same_round = [j.step for j in judged if j.step.round == window.round and j.served]
    higher = sorted(s.offered for s in same_round if s.offered >= window.offered)
    what = f"{broken_by(window, slo_ms)} in round {window.round}"
    if len(higher) >= SAME_ROUND_SERVED:
        return f"{what}: a transient, {higher[0]:,.0f}-{higher[-1]:,.0f} RPS were served in the same round"
    others = {j.step.round for j in judged} - {window.round}
    contradict = confirm = 0
    for round_ in others:
        members = [j for j in judged if j.step.round == round_]
        served = any(j.served and j.step.offered >= window.offered for j in members)
        broke = any(not j.served and j.step.offered <= window.offered for j in members)
        contradict += served and not broke
        confirm += broke and not served
    if contradict > confirm and 2 * contradict > len(others):
        return f"{what}: a transient, {contradict} of the other {len(others)} rounds served as much or more"
    return None


def _bracket(judged: Sequence[_Judged], slo_ms: float) -> _Bracket:
    transients: list[str] = []
    broken: list[Step] = []
    for j in judged:
        if j.served:
            continue
        why = _transient(j.step, judged, slo_ms)
        if why is None:
            broken.append(j.step)
        else:
            transients.append(why)
    first = min(broken, key=lambda s: s.offered) if broken else None
    limit = first.offered if first is not None else math.inf
    served = [j.step for j in judged if j.served and j.step.offered < limit]
    best = max(served, key=lambda s: s.offered) if served else None
    return _Bracket(best, first, tuple(transients))


def _interval(judged: Sequence[_Judged], slo_ms: float, broken_at: float) -> tuple[float, float, int] | None:
    """The jackknife over rounds of the highest rate served, reaching up at least to `broken_at`; None with fewer
    than MIN_ROUNDS rounds, or when leaving one out leaves nothing served or nothing broken."""
    rounds = sorted({j.step.round for j in judged})
    if len(rounds) < MIN_ROUNDS:
        return None

    def capacity_of(selected: Sequence[int]) -> float | None:
        kept = set(selected)
        bracket = _bracket([j for j in judged if j.step.round in kept], slo_ms)
        return bracket.served.offered if bracket.served is not None and bracket.broken is not None else None

    estimate = jackknife(rounds, capacity_of)
    if estimate is None:
        return None
    return estimate.low, max(estimate.high, broken_at), estimate.rounds


def find_capacity(steps: Sequence[Step], slo_ms: float) -> Capacity | None:
    """The highest offered rate served below the lowest one that broke, with its interval over rounds and the
    transients dropped; None when no window was served (or none could tell: closed loop)."""
    judged = [_Judged(s, ok) for s in steps if (ok := serves(s, slo_ms)) is not None]
    bracket = _bracket(judged, slo_ms)
    if bracket.served is None:
        return None
    best, first = bracket.served, bracket.broken
    if first is None:
        return Capacity(rps=best.offered, slo_ms=slo_ms, transients=bracket.transients)
    interval = _interval(judged, slo_ms, first.offered)
    low, high, rounds = interval if interval is not None else (None, None, None)
    return Capacity(
        rps=best.offered,
        broken_at=first.offered,
        broken_by=broken_by(first, slo_ms),
        low=low,
        high=high,
        rounds=rounds,
        slo_ms=slo_ms,
        transients=bracket.transients,
    )

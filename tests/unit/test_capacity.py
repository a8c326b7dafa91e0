"""The capacity at a latency SLO (runner.capacity): misses below the knee count unless the rounds call them
transients, and the capacity has an interval from the rounds as the knee does."""

from __future__ import annotations

import pytest

from runner.assess import assess
from runner.capacity import find_capacity
from runner.model import Step
from support.report_data import LOCAL_ROUNDS_RUN
from support.steps import make_step

KNEE_RPS = 1000.0  # utilization = 0.9 x (rps / 1000)^0.85: the 90% knee at 1,000 RPS


def _window(index: int, round_: int, offered: float, p99_ms: float, delivered: float = 1.0) -> Step:
    rps = offered * delivered  # short of the offered rate: Envoy at its limit
    utilization = 0.9 * (rps / KNEE_RPS) ** 0.85 if delivered == 1 else 1.0
    return make_step(index, users=round(offered / 5), rps=rps, target_rps=offered, p99_ms=p99_ms, round=round_,
                     utilization=utilization)  # fmt: skip


def _slo_binds_below_the_knee() -> list[Step]:
    """Five rounds at 700, 850 and 930 RPS and a probe at 1,100: p99 crosses 50 ms between 700 and 850, below the
    CPU knee at 1,000, in every round but the last, where 850 RPS happened to read 45 ms."""
    steps = []
    for round_ in range(1, 6):
        p99_at_850 = 45.0 if round_ == 5 else 70.0
        for offered, p99, delivered in ((700, 20.0, 1.0), (850, p99_at_850, 1.0), (930, 90.0, 1.0), (1100, 900, 0.9)):
            steps.append(_window(len(steps), round_, offered, p99, delivered))
    return steps


def test_an_slo_that_binds_below_the_knee_is_the_capacity_with_its_interval_from_the_rounds():
    """Until 2026-11 every miss offered below the knee was dropped as a transient: this run's capacity read 850 RPS
    (the one round where 850 happened to pass) and broke at 1,100 RPS by delivery, above the knee, so the 50 ms SLO
    never showed that it binds at 700-850 RPS in four rounds of five."""
    outcome = assess(_slo_binds_below_the_knee(), 0.9, slo_ms=50)
    assert outcome.knee is not None and outcome.knee.rps == pytest.approx(KNEE_RPS, rel=0.02)
    capacity = outcome.capacity
    assert capacity is not None
    assert (capacity.rps, capacity.broken_at) == (700, 850)
    assert capacity.broken_by == "p99 70 ms at 850 RPS, over the 50 ms SLO"
    assert capacity.rps < outcome.knee.rps  # latency broke before the CPU threshold
    # every round agrees that 700 RPS is served: the interval is the rounds' (none between them) up to the break
    assert (capacity.low, capacity.high, capacity.rounds) == (pytest.approx(700), 850, 5)
    assert capacity.transients == () and capacity.slo_ms == 50


def test_the_capacity_interval_comes_from_the_scatter_between_rounds_and_needs_three():
    steps = _slo_binds_below_the_knee()
    noisy = [s.model_copy(update={"p99_ms": 30.0}) if s.round == 2 and s.offered == 850 else s for s in steps]
    capacity = find_capacity(noisy, slo_ms=50)  # round 2 also served 850: two rounds of five against three
    assert capacity is not None and (capacity.rps, capacity.broken_at) == (700, 850)
    # without round 1, 3 or 4 the two that served 850 are the most, and the capacity reads 850: the rounds disagree
    assert capacity.interval is not None and capacity.interval[0] < 650 and capacity.interval[1] > 850
    two_rounds = find_capacity([s for s in steps if s.round <= 2], slo_ms=50)
    assert two_rounds is not None and (two_rounds.rps, two_rounds.broken_at) == (700, 850)
    assert two_rounds.interval is None and two_rounds.rounds is None


def test_a_control_window_that_missed_in_one_round_of_five_is_a_transient_and_the_capacity_says_why():
    """Recorded (local-rounds, 250m): the control window at 602 RPS read p99 73 ms in round 3 and at most 7 ms in
    the other four; taken literally at a 50 ms SLO it would put the capacity at 407 RPS."""
    from runner.results import load_summary

    config = load_summary(LOCAL_ROUNDS_RUN).configs[0]
    capacity = find_capacity(config.steps, slo_ms=50)
    assert capacity is not None
    assert (round(capacity.rps), round(capacity.broken_at or 0)) == (922, 954)
    assert capacity.transients == (
        "p99 73 ms at 602 RPS, over the 50 ms SLO in round 3: a transient, 4 of the other 4 rounds served as much "
        "or more",
    )
    assert capacity.rounds == 5 and capacity.interval is not None
    low, high = capacity.interval
    assert low < capacity.rps < capacity.broken_at <= high  # type: ignore[operator]


def test_a_break_that_one_window_above_it_contradicts_still_counts():
    steps = [_window(0, 1, 1000, 20), _window(1, 1, 1100, 80), _window(2, 1, 1200, 20)]
    capacity = find_capacity(steps, slo_ms=50)
    assert capacity is not None and (capacity.rps, capacity.broken_at) == (1000, 1100)
    assert capacity.transients == ()

"""How many rounds a knee needs to reach its target interval, from the rounds it had (runner.curve.rounds_to_reach).

Simulated runs: each round's knee scatters log-normally around the truth. From the interval of 5 rounds the
function names a round count; a fresh run of that many rounds with the same scatter must then come out near the
target: about half of such runs within it and the median width near it (a count far off moves both).
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from runner.assess import knee_interval_text
from runner.curve import jackknife, rounds_to_reach
from runner.model import Knee

TARGET = 0.08
MOST = 50


def _width(rng: np.random.Generator, rounds: int, scatter: float) -> float:
    """The half-width of the jackknife interval over `rounds` round knees with log scatter `scatter`."""
    knees = dict(enumerate(np.exp(rng.normal(math.log(1000.0), scatter, rounds)), start=1))
    estimate = jackknife(list(knees), lambda chosen: math.exp(statistics.fmean(math.log(knees[r]) for r in chosen)))
    assert estimate is not None
    return estimate.half_width


def test_the_named_round_count_brings_a_fresh_run_to_about_its_target():
    rng = np.random.default_rng(20)
    for scatter in (0.08, 0.12):  # per-round scatter of knees measured here: 7-13% (docs/measurements.md)
        after: list[float] = []
        for _ in range(400):
            needed = rounds_to_reach(_width(rng, 5, scatter), 5, TARGET, MOST)
            if needed is not None:
                after.append(_width(rng, needed, scatter) / TARGET)
        within, median = sum(w <= 1 for w in after) / len(after), statistics.median(after)
        assert len(after) > 350, (scatter, len(after))
        # a count 1.5 times too small gives a median of 1.13-1.29 here, one 1.5 times too large 0.67-0.80
        assert 0.85 <= median <= 1.1 and 0.45 <= within <= 0.75, (scatter, within, median)


def test_a_knee_within_its_target_needs_no_more_rounds_and_one_far_outside_needs_many():
    assert rounds_to_reach(0.06, 5, TARGET, MOST) == 5
    assert rounds_to_reach(0.08, 5, TARGET, MOST) == 5
    assert rounds_to_reach(0.09, 5, TARGET, MOST) == 6
    wide, wider = rounds_to_reach(0.16, 5, TARGET, MOST), rounds_to_reach(0.30, 5, TARGET, MOST)
    assert wide is not None and wider is not None and 5 < wide < wider
    assert rounds_to_reach(2.0, 5, TARGET, MOST) is None  # more than MOST
    assert rounds_to_reach(0.2, 2, TARGET, MOST) is None  # no interval from 2 rounds to scale


def test_a_knee_wider_than_its_target_says_how_many_rounds_would_reach_it():
    def ending(low: float, high: float) -> str:
        knee = Knee(rps=1000.0, low=low, high=high, method="rounds", windows=15, rounds=5)
        return knee_interval_text(knee, TARGET)

    assert ending(890.0, 1112.0).endswith("wider than the +-8% target (at this run's scatter about 8 rounds would "
                                         "reach it: load.max_rounds: 8)")  # fmt: skip
    assert ending(950.0, 1050.0).endswith("within the +-8% target")
    assert "more than 50 rounds" in ending(300.0, 3000.0)

import pytest
from simulated_envoy import make_step

from runner.knee import find_knee


def test_knee_interpolates_between_the_bracketing_steps():
    steps = [
        make_step(0, users=4, rps=4300, utilization=0.64),
        make_step(1, users=8, rps=5700, utilization=0.80),
        make_step(2, users=12, rps=6700, utilization=0.92),
    ]
    result = find_knee(steps, 0.90)
    assert result.reason is None
    assert result.knee.rps == pytest.approx(5700 + (0.10 / 0.12) * 1000)
    assert result.knee.cpu_utilization == 0.90
    assert result.knee.users == pytest.approx(11.3, abs=0.05)
    assert (result.knee.below, result.knee.above) == (1, 2)


def test_steps_measured_out_of_order_still_bracket_by_offered_load():
    steps = [
        make_step(0, users=10, rps=1000, utilization=0.50, target_rps=1000),
        make_step(1, users=40, rps=1800, utilization=1.00, target_rps=4000),
        make_step(2, users=17, rps=1700, utilization=0.86, target_rps=1700),
        make_step(3, users=18, rps=1750, utilization=0.93, target_rps=1750),
    ]
    knee = find_knee(steps, 0.90).knee
    assert (knee.below, knee.above) == (2, 3)
    assert 1700 < knee.rps < 1750


def test_no_knee_when_the_threshold_is_never_reached_says_why():
    steps = [make_step(i, users=u, rps=u * 100, utilization=u / 20) for i, u in enumerate((2, 4, 8))]
    result = find_knee(steps, 0.90)
    assert result.knee is None
    assert "peaked at 40%" in result.reason and "offer more load" in result.reason


def test_no_knee_when_the_first_step_is_already_above():
    result = find_knee([make_step(0, users=1, rps=900, utilization=0.97)], 0.90)
    assert result.knee is None and "start the search lower" in result.reason


def test_no_steps_is_not_a_knee():
    assert find_knee([], 0.9).reason == "no step was measured"

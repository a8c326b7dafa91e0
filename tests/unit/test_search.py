import statistics

import pytest
from simulated_envoy import SimulatedEnvoy

from runner.knee import find_knee
from runner.measure import LoadLevel
from runner.scenario import parse_scenario
from runner.search import AdaptiveSearch, LevelMaker, RampSearch, make_search

RPS = LevelMaker(mode="rps", max_rps_per_user=20, min_users=2)
USERS = LevelMaker(mode="users", max_rps_per_user=20, min_users=1)


def drive(search, envoy, limit=30):
    steps = []
    while (level := search.next_level(steps)) is not None and len(steps) < limit:
        steps.append(envoy.run(len(steps), level))
    return steps


def test_levels_spread_target_rps_over_paced_users():
    assert RPS.level(1000) == LoadLevel(users=50, user_rps=20.0)
    assert RPS.level(10) == LoadLevel(users=2, user_rps=5.0)
    assert USERS.level(7.4) == LoadLevel(users=7)


@pytest.mark.parametrize("capacity", [300, 1000, 2200, 9000, 40000])
def test_adaptive_search_on_simulated_envoy_brackets_the_threshold_within_tolerance(capacity):
    envoy = SimulatedEnvoy(capacity, noise=0.01)
    steps = drive(AdaptiveSearch(100, RPS, 0.90), envoy)
    knee = find_knee(steps, 0.90).knee
    true_knee = capacity * (0.90 - envoy.idle) / (1 - envoy.idle)
    assert knee is not None
    assert knee.rps == pytest.approx(true_knee, rel=0.03)
    assert len(steps) <= 8
    closest = min(abs(s.cpu_utilization_mean - 0.90) for s in steps)
    assert closest <= 0.02


def test_adaptive_search_needs_six_windows_or_fewer_on_average_on_simulated_envoy():
    counts = [
        len(drive(AdaptiveSearch(150, RPS, 0.90), SimulatedEnvoy(capacity, noise=0.01, seed=seed)))
        for seed, capacity in enumerate((400, 700, 1000, 1500, 2100, 3000, 5000, 8000))
    ]
    assert statistics.mean(counts) <= 6


def test_adaptive_search_shrinks_when_the_start_is_already_saturated():
    steps = drive(AdaptiveSearch(5000, RPS, 0.90), SimulatedEnvoy(500, noise=0.0))
    assert steps[1].target_rps < steps[0].target_rps
    assert find_knee(steps, 0.90).knee is not None


def test_adaptive_search_in_users_mode_stops_when_users_cannot_be_split():
    steps = drive(AdaptiveSearch(1, USERS, 0.90), SimulatedEnvoy(1000, noise=0.0))
    pair = [s.users for s in steps]
    assert len(steps) <= 8 and len(set(pair)) == len(pair)
    assert find_knee(steps, 0.90).knee is not None


def test_adaptive_search_respects_the_step_budget():
    search = AdaptiveSearch(100, RPS, 0.90, tolerance=0.0001, max_steps=4)
    assert len(drive(search, SimulatedEnvoy(1000, noise=0.05))) == 4


def test_ramp_stops_after_the_first_step_past_the_threshold():
    ramp = RampSearch([4, 8, 12, 16, 20], USERS, 0.90)
    steps = drive(ramp, SimulatedEnvoy(4000, idle=0.0))  # 400 RPS per user: 90% at 9 users
    assert [s.users for s in steps] == [4, 8, 12]


def test_scenario_chooses_the_search():
    ramp = parse_scenario({"name": "t", "envoy": {"cpu": [1]}, "load": {"search": "ramp", "mode": "users"}})
    assert isinstance(make_search(ramp.load, 0.9), RampSearch)
    adaptive = parse_scenario({"name": "t", "envoy": {"cpu": [1]}})
    assert isinstance(make_search(adaptive.load, 0.9), AdaptiveSearch)


def test_a_prediction_that_repeats_the_last_level_grows_instead():
    # a tiny CPU limit: utilization barely moves between 150 and 195 RPS (measured at 100m)
    from simulated_envoy import make_step

    search = AdaptiveSearch(150, RPS, 0.90)
    first = make_step(0, users=8, rps=150, utilization=0.699, target_rps=150)
    level = search.next_level([first])
    second = make_step(1, users=level.users, rps=level.target_rps, utilization=0.689, target_rps=level.target_rps)
    third = search.next_level([first, second])
    assert third.target_rps >= 1.9 * second.target_rps


def test_the_bracket_phase_never_measures_the_same_level_twice():
    envoy = SimulatedEnvoy(1000, noise=0.03, seed=7)
    steps = drive(AdaptiveSearch(100, RPS, 0.90, max_steps=12), envoy)
    offered = [s.target_rps for s in steps]
    assert all(abs(a - b) > 0.01 * a for i, a in enumerate(offered) for b in offered[i + 1 :])


def test_a_bracket_narrower_than_two_percent_of_the_load_ends_the_search():
    from simulated_envoy import make_step

    search = AdaptiveSearch(150, RPS, 0.90)
    steps = [
        make_step(0, users=8, rps=150, utilization=0.27, target_rps=150),
        make_step(1, users=37, rps=735, utilization=0.839, target_rps=735),
        make_step(2, users=38, rps=745, utilization=0.943, target_rps=745),
    ]
    assert search.next_level(steps) is None

"""The adaptive search on a simulated Envoy: where it puts the knee, how sure it says it is (and whether
that holds), how many windows it takes, and where it finds the capacity.

The simulated Envoy's CPU per request falls with load (utilization grows as RPS^b, b < 1) and each
second's CPU sample carries noise; `SimulatedEnvoy.true_knee` is where its mean utilization reaches 90%.
"""

from __future__ import annotations

import math
import random
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.assess import assess, search_ending
from runner.capacity import find_capacity
from runner.knee import find_knee
from runner.model import Step
from runner.scenario import parse_scenario
from runner.search import MAX_GROWTH, AdaptiveSearch, LevelMaker, RampSearch, Targets, make_search
from support.examples import examples
from support.simulated import SimulatedEnvoy

THRESHOLD = 0.90
RPS = LevelMaker(mode="rps", max_rps_per_user=20, min_users=1)
USERS = LevelMaker(mode="users", max_rps_per_user=20, min_users=1)


def drive(search: AdaptiveSearch | RampSearch, envoy: SimulatedEnvoy) -> list[Step]:
    steps: list[Step] = []
    while (level := search.next_level(steps)) is not None:
        steps.append(envoy.window(len(steps), level))
    return steps


def _configurations(count: int, noise: float) -> list[tuple[SimulatedEnvoy, list[Step]]]:
    """`count` simulated configurations, limits 0.1-4 cores and exponents 0.6-1.0, each searched from the
    default start (2,000 RPS per core)."""
    found = []
    for seed in range(count):
        limit = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0][seed % 6]
        envoy = SimulatedEnvoy(limit_cores=limit, exponent=0.6 + 0.4 * ((seed * 7) % 10) / 9, noise=noise, seed=seed)
        search = AdaptiveSearch(2000.0 * limit, RPS, THRESHOLD, Targets(latency_slo_ms=10_000))
        found.append((envoy, drive(search, envoy)))
    return found


def test_the_95_percent_interval_holds_the_true_knee_about_95_times_in_100():
    results = _configurations(120, noise=0.03)
    covered = 0
    for envoy, steps in results:
        knee = find_knee(steps, THRESHOLD).knee
        assert knee is not None and knee.low is not None and knee.high is not None
        covered += knee.low <= envoy.true_knee(THRESHOLD) <= knee.high
    # 95% nominal over 120 configurations: a binomial sd of 2%; below 88% the interval is too narrow
    assert covered / len(results) >= 0.88, covered


def test_at_realistic_noise_the_search_reaches_the_3_percent_target_in_8_windows_on_average():
    results = _configurations(60, noise=0.03)
    widths = [find_knee(steps, THRESHOLD).knee.half_width for _, steps in results]
    assert sum(w is not None and w <= 0.03 for w in widths) / len(widths) >= 0.9
    assert statistics.mean(len(steps) for _, steps in results) <= 8.5
    errors = [abs(find_knee(s, THRESHOLD).knee.rps / e.true_knee(THRESHOLD) - 1) for e, s in results]
    assert statistics.median(errors) <= 0.01 and max(errors) <= 0.04


def test_capacity_is_bracketed_just_below_where_the_simulated_envoy_stops_keeping_up():
    for envoy, steps in _configurations(24, noise=0.03):
        capacity = find_capacity(steps, slo_ms=10_000)
        assert capacity is not None and capacity.broken_at is not None
        assert capacity.broken_at / capacity.rps - 1 <= 0.05
        # delivered within 2% up to capacity: the break lies at most 2% above Envoy's own ceiling
        assert capacity.rps <= envoy.capacity_rps() * 1.02 < capacity.broken_at * 1.02


def test_noisy_windows_spend_the_budget_and_say_so():
    envoy = SimulatedEnvoy(limit_cores=0.25, noise=0.25, seed=3)
    targets = Targets(max_steps=10)
    steps = drive(AdaptiveSearch(500.0, RPS, THRESHOLD, targets), envoy)
    assert len(steps) == 10
    # what the runner records (runner.assess.search_ending, as the sweep calls it)
    ending = search_ending(assess(steps, THRESHOLD, targets.latency_slo_ms), steps, targets)
    assert ending.endswith("after 10 windows"), ending
    assert any(words in ending for words in ("wider than the +-3% target", "scatter too much", "no interval"))


def test_on_a_machine_whose_speed_moves_between_windows_a_locating_pass_still_crosses_the_threshold():
    # one pass of 6 windows (rounds: 1) from half the knee, on a curve as flat as TLS under a CFS quota near its
    # knee (utilization ~ RPS^0.4) and a machine whose speed moves +-6% (one sd) from window to window, as a
    # 2-core VM's does: windows just under the threshold must not keep the search creeping up below it (aiming
    # at the threshold from the busiest window each time, 187 of these 200 crossed; a cluster run crept 905, 989,
    # 987, 1,013, 1,042 RPS at 83-89% and ended not-saturated)
    crossed = 0
    for seed in range(200):
        envoy = SimulatedEnvoy(limit_cores=0.3, exponent=0.4, noise=0.03, seed=seed)
        speeds = random.Random(seed)
        search = AdaptiveSearch(envoy.true_knee(THRESHOLD) / 2, RPS, THRESHOLD, Targets(max_steps=6))
        steps: list[Step] = []
        while (level := search.next_level(steps)) is not None:
            steps.append(envoy.window(len(steps), level, speed=speeds.gauss(1.0, 0.06)))
        crossed += any(s.cpu_utilization_mean >= THRESHOLD for s in steps)
    assert crossed >= 195, crossed


def test_a_start_past_the_knee_shrinks_first():
    envoy = SimulatedEnvoy(limit_cores=0.25, noise=0.01)
    steps = drive(AdaptiveSearch(5000.0, RPS, THRESHOLD), envoy)
    assert steps[1].offered == 0.25 * steps[0].offered
    assert find_knee(steps, THRESHOLD).knee is not None


def test_closed_loop_users_are_bisected_until_they_cannot_be_split():
    envoy = SimulatedEnvoy(limit_cores=1.0, noise=0.0)  # 400 RPS per user: the knee near 13 users
    steps = drive(AdaptiveSearch(1, USERS, THRESHOLD), envoy)
    knee = find_knee(steps, THRESHOLD)
    assert knee.knee is not None and knee.bracket is not None
    below, above = knee.bracket
    assert above.users - below.users == 1


def test_the_scenario_chooses_the_search_and_its_start():
    ramp = parse_scenario({"name": "t", "envoy": {"cpu": [1]}, "load": {"search": "ramp", "mode": "users"}})
    assert isinstance(make_search(ramp.load, 0.9), RampSearch)
    adaptive = parse_scenario({"name": "t", "envoy": {"cpu": [0.25]}})
    search = make_search(adaptive.load, 0.9, envoy_cpu_cores=0.25)
    assert isinstance(search, AdaptiveSearch) and search.start == 500  # 2,000 RPS per core x 0.25
    hinted = make_search(adaptive.load, 0.9, envoy_cpu_cores=0.5, knee_per_core=4000)
    assert isinstance(hinted, AdaptiveSearch) and hinted.start == 0.6 * 4000 * 0.5


@settings(max_examples=examples(150))
@given(
    limit=st.floats(0.05, 16.0),
    exponent=st.floats(0.5, 1.0),
    cost_us=st.floats(50.0, 600.0),
    noise=st.floats(0.0, 0.2),
    start=st.floats(10.0, 200_000.0),
    seed=st.integers(0, 10_000),
)
def test_any_envoy_the_search_ends_within_its_budget_and_grows_at_most_4x(limit, exponent, cost_us, noise, start, seed):
    envoy = SimulatedEnvoy(cost_us=cost_us, exponent=exponent, noise=noise, seed=seed, limit_cores=limit)
    targets = Targets(max_steps=12)
    steps = drive(AdaptiveSearch(start, RPS, THRESHOLD, targets), envoy)
    assert 1 <= len(steps) <= 12
    for step in steps[1:]:
        highest = max(s.offered for s in steps[: step.index])
        assert step.offered <= highest * MAX_GROWTH * 1.0001
        assert math.isfinite(step.offered) and step.offered > 0
    ending = search_ending(assess(steps, THRESHOLD, targets.latency_slo_ms), steps, targets)
    assert ending.endswith(f"after {len(steps)} windows"), ending
    assert "capacity" in ending or "no rate served within the SLO" in ending, ending  # open loop: capacity said


def test_windows_that_cross_the_threshold_only_out_of_order_send_the_search_below_them():
    # near the knee the noise outgrows the steps (300 RPS read 96%, 315 RPS 89%, 330 RPS 91%): climbing again
    # only measured more saturated windows until the budget ran out; the next window goes below them instead
    envoy = SimulatedEnvoy(limit_cores=0.15, noise=0.0)
    read = [(300.0, 0.96), (315.0, 0.89), (330.0, 0.91)]
    steps = [
        envoy.window(i, RPS.level(rps)).model_copy(update={"cpu_utilization_mean": u})
        for i, (rps, u) in enumerate(read)
    ]
    assert find_knee(steps, THRESHOLD).knee is None
    search = AdaptiveSearch(300.0, RPS, THRESHOLD)
    level = search.next_level(steps)
    assert level is not None and level.target_rps is not None and level.target_rps < 300
    below = envoy.window(3, level).model_copy(update={"cpu_utilization_mean": 0.80})
    knee = find_knee([*steps, below], THRESHOLD).knee
    assert knee is not None and level.target_rps < knee.rps < 330
    # closed loop: whole users, fewer than the lowest count that reached the threshold
    users = [
        envoy.window(i, USERS.level(n)).model_copy(update={"cpu_utilization_mean": u})
        for i, (n, u) in enumerate([(3, 0.95), (4, 0.88)])
    ]
    level = AdaptiveSearch(3, USERS, THRESHOLD).next_level(users)
    assert level is not None and level.users == 2

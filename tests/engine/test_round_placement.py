"""Where a round puts its windows when the machine changed speed since the last round: the sweep engine on a
simulated Envoy (support.simulated) whose machine steps 20-25% slower or faster at every round, as a VM's CPU
per request moved 30% between two passes of one load (issue 20)."""

from __future__ import annotations

import random
from pathlib import Path

from runner.knee import fit_windows
from runner.plan import plan_sweep
from runner.results import RunStore
from runner.rounds import CONTROL_UTILIZATION, VisitPlanner
from runner.scenario import parse_scenario
from runner.search import make_search
from runner.sweep import Sweep
from support.simulated import FakeClock, FakePlatform, SimulatedEnvoy
from support.steps import make_step

ROUND_SPEEDS = (1.0, 0.8, 1.25, 0.8, 1.25)  # the machine's speed in each round: a step at every round


def _stepping_run(tmp_path: Path, seed: int):
    scenario = parse_scenario({
        "name": "steps", "envoy": {"cpu": [0.25, 0.5]},
        "load": {"step_seconds": 10, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "rounds": 5,
                 "seed": seed, "knee_interval": 0.0001},  # every round is run: none ends early
    })  # fmt: skip
    configs = len(plan_sweep(scenario).configurations)

    def speed(second: int) -> float:
        return ROUND_SPEEDS[min((len(platform.applied) - 1) // configs, len(ROUND_SPEEDS) - 1)]

    platform = FakePlatform(
        FakeClock(), lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores, seed=seed), speed=speed
    )
    store = RunStore.create(scenario, tmp_path / str(seed))
    Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock).run()
    return store.summary


def test_every_round_reads_the_curve_near_the_knee_and_measures_the_control_after_a_speed_step(tmp_path):
    missing_rounds, missing_controls, near = [], [], 0
    for seed in range(10):
        summary = _stepping_run(tmp_path, seed)
        assert summary.rounds is not None and summary.rounds.control is not None
        for config in summary.configs:
            fitted = {s.round for s in fit_windows(config.steps, 0.9)}
            missing_rounds += [(seed, config.key, r) for r in range(1, 6) if r not in fitted]
            near += sum(1 for r in range(2, 6) if any(0.8 <= s.cpu_utilization_mean < 0.98 and s.round == r
                                                      for s in fit_windows(config.steps, 0.9)))  # fmt: skip
            if config.key == summary.rounds.control.key:
                controls = {s.round for s in config.steps if s.control}
                missing_controls += [(seed, r) for r in range(1, 6) if r not in controls]
    # every round gives the fit its own intercept, so the interval comes from five rounds, not fewer
    assert not missing_rounds, missing_rounds
    assert not missing_controls, missing_controls  # the drift figure has a reading from every round
    assert near >= 0.9 * 10 * 2 * 4, near  # and rounds 2-5 read the curve near the threshold, where the knee is


def _jittery_run(tmp_path: Path, seed: int, sigma: float):
    """Three rounds on a machine whose speed is redrawn every 12 s (about one window): lognormal, `sigma`."""
    scenario = parse_scenario({
        "name": "jitter", "envoy": {"cpu": [0.25, 0.5]},
        "load": {"step_seconds": 10, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "rounds": 3,
                 "seed": seed, "knee_interval": 0.0001},
    })  # fmt: skip
    draw = random.Random(seed)
    speeds = [draw.lognormvariate(0, sigma) for _ in range(1000)]
    platform = FakePlatform(
        FakeClock(),
        lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores, seed=seed),
        speed=lambda second: speeds[(second // 12) % len(speeds)],
    )
    store = RunStore.create(scenario, tmp_path / str(seed))
    Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock).run()
    return store.summary


def test_a_round_whose_windows_all_miss_the_band_measures_more_until_one_fits(tmp_path):
    # a machine whose speed moves +-10% from one window to the next, as this VM's did (one load read 71-99%): a
    # round's windows may all read under the band or past the curve; the knee must still stand on every round.
    # Before the rescue windows, 2 of 40 configurations here had their knee from 2 of 3 rounds.
    missing, windows, knees = [], 0, 0
    for seed in range(20):
        summary = _jittery_run(tmp_path, seed, sigma=0.1)
        for config in summary.configs:
            fitted = {s.round for s in fit_windows(config.steps, 0.9)}
            missing += [(seed, config.key, r) for r in (1, 2, 3) if r not in fitted]
            windows += len(config.steps)
            knees += config.knee is not None and config.knee.rounds == 3
    assert not missing, missing
    assert knees >= 0.9 * 40, knees  # and the rounds fit stands on all three (39 of 40 when written)
    assert windows <= 40 * 11, windows  # the rescue costs a window now and then, not one per visit


def test_the_rescue_window_goes_between_a_round_under_the_band_and_one_past_the_curve():
    # the 500m configuration of a local run (2026-11-26): round 1 located its knee with 1,915 RPS at 54% and
    # 3,584 RPS at 98%, and no window between 60% and 98% for the rounds fit
    search = make_search(parse_scenario({"name": "r", "envoy": {"cpu": [0.5]}}).load, 0.9, 0.5)
    planner = VisitPlanner(search, 2)  # type: ignore[arg-type]
    under = make_step(0, rps=1925, target_rps=1915, utilization=0.54, round=1)
    past = make_step(1, rps=3593, target_rps=3584, utilization=0.98, round=1)
    load = planner.rescue([under, past], [under, past])
    assert load is not None and 1915 < load < 3584 * 0.86, load
    curve = 1925 * (0.6 / 0.54) ** (1 / 0.85), 1925 * (0.98 / 0.54) ** (1 / 0.85)  # the band on a typical curve
    assert curve[0] < load < curve[1], (load, curve)
    inside = make_step(2, rps=load, target_rps=load, utilization=0.75, round=1)
    assert planner.rescue([under, past, inside], [under, past, inside]) is None  # one fits: no more
    # a second try after the first also read under the band goes higher than it, not to the same load again
    again = make_step(2, rps=load, target_rps=load, utilization=0.55, round=1)
    second = planner.rescue([under, past, again], [under, past, again])
    assert second is not None and load < second < 3584, (load, second)
    # a window at a third of the limit that the generator delivered 97.8% of is no bound from above (a local
    # run of 2026-11-26 aimed its rescues at 1,414 RPS, under the window at 2,000 that read 53%, because of one)
    short = make_step(3, rps=978, target_rps=1000, utilization=0.33, round=1)
    visit = [short, under, past]
    load = planner.rescue(visit, visit)
    assert load is not None and 1915 < load < 3584 * 0.86, load


def test_a_control_window_under_the_band_does_not_cost_its_round_the_lever_arm(tmp_path):
    # a faster machine puts the control (72% when it was chosen) under the band the rounds fit uses: that round
    # still reads the curve twice in the band, or the rounds fit has no slope within it (a knee_truth run of
    # 2026-11-26: controls at 50-57%, one window in the band in each of rounds 3-5, and an interpolated knee)
    short = []
    for seed in range(10):
        summary = _stepping_run(tmp_path, seed)
        assert summary.rounds is not None and summary.rounds.control is not None
        config = next(c for c in summary.configs if c.key == summary.rounds.control.key)
        for round_ in range(2, 6):
            control = next(s for s in config.steps if s.control and s.round == round_)
            in_band = [s for s in fit_windows(config.steps, 0.9) if s.round == round_]
            if control.cpu_utilization_mean < 0.6 and len(in_band) < 2:
                short.append((seed, round_, f"control {control.cpu_utilization_mean:.2f}", len(in_band)))
    assert not short, short


def test_a_first_round_of_throttled_windows_still_places_the_control():
    # a 250m quota throttles Poisson bursts at any load: round 1 located the knee with a window at 40% (20% of
    # periods throttled) and one at 99%, neither in the fit's range, and the control was never chosen; the run
    # ended without the machine's drift (CI, 2026-11-26: control_drift None in the rounds sweep test)
    search = make_search(parse_scenario({"name": "r", "envoy": {"cpu": [0.25]}}).load, 0.9, 0.25)
    planner = VisitPlanner(search, 2)  # type: ignore[arg-type]
    low = make_step(0, rps=1000, target_rps=1000, utilization=0.40, throttled_share=0.2, round=1)
    high = make_step(1, rps=2000, target_rps=2000, utilization=0.99, throttled_share=0.6, round=1)
    control = planner.offered_for([low, high], CONTROL_UTILIZATION)
    assert control is not None and 1000 < control < 2000, control


def test_a_window_under_the_band_short_of_its_rate_is_no_top_of_the_curve():
    # a local run's window at 33% that the generator delivered 97.8% of (2026-11-26) was taken for the top of the
    # curve: the visit measured again 15% lower, further from the band, and placed nothing from it
    search = make_search(parse_scenario({"name": "r", "envoy": {"cpu": [0.5]}}).load, 0.9, 0.5)
    planner = VisitPlanner(search, 2)  # type: ignore[arg-type]
    assert not planner.past_the_curve(make_step(0, rps=978, target_rps=1000, utilization=0.33))
    assert planner.past_the_curve(make_step(1, rps=2900, target_rps=3000, utilization=0.85))  # in the band: the top
    assert planner.past_the_curve(make_step(2, rps=3000, target_rps=3000, utilization=0.98))  # saturated
    assert not planner.past_the_curve(make_step(3, rps=3000, target_rps=3000, utilization=0.85))

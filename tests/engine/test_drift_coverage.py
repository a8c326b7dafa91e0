"""The knee's interval on a machine whose speed drifts during the run: the sweep engine end to end on a
simulated Envoy (support.simulated) whose every request costs more or less as the machine's speed moves.

The machine's speed is drawn anew every 30 s, uniformly within +-15% of nominal: the window-to-window and
pass-to-pass movement measured on 2-core cloud VMs (issue 20). The truth is the knee at nominal speed. An
interval from the scatter between interleaved rounds must hold it about 95 times in 100; the interval of
one pass over the windows (Fieller's, from their scatter around one curve) does not: drift between its
windows looks like a curve.
"""

from __future__ import annotations

import random
from pathlib import Path

from runner.figures import control_drift, knee_ratio
from runner.model import ConfigResult, RunSummary
from runner.plan import plan_sweep
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import EPOCH, FakeClock, FakePlatform, SimulatedEnvoy

DRIFT = 0.15
SEGMENT_S = 30
RUNS = 50  # two configurations each: 100 knees


def _drifting_sweep(tmp_path: Path, seed: int, rounds: int, drift: float = DRIFT) -> list[ConfigResult]:
    return _drifting_run(tmp_path, seed, rounds, drift).configs


def _drifting_run(
    tmp_path: Path, seed: int, rounds: int, drift: float = DRIFT, segment_s: float = SEGMENT_S, **load: float
) -> RunSummary:
    draw = random.Random(seed)
    speeds: dict[int, float] = {}

    def speed(second: int) -> float:
        segment = int((second - EPOCH) // segment_s)
        return speeds.setdefault(segment, 1 + draw.uniform(-drift, drift))

    scenario = parse_scenario({
        "name": "drift", "envoy": {"cpu": [0.25, 0.5]},
        "load": {"step_seconds": 10, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "rounds": rounds,
                 "seed": seed, **load},
    })  # fmt: skip
    platform = FakePlatform(
        FakeClock(), lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores, seed=seed), speed=speed
    )
    store = RunStore.create(scenario, tmp_path / f"{rounds}-{seed}")
    Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock).run()
    return store.summary


def _covered(results: list[ConfigResult]) -> tuple[int, int]:
    """(knees whose interval holds the nominal knee, knees with an interval)."""
    held = with_interval = 0
    for result in results:
        truth = SimulatedEnvoy(limit_cores=result.envoy.cpu_cores).true_knee(0.90)
        interval = result.knee.interval if result.knee is not None else None
        if interval is not None:
            with_interval += 1
            held += interval[0] <= truth <= interval[1]
    return held, with_interval


def test_the_rounds_interval_holds_the_nominal_knee_on_a_drifting_machine_where_one_pass_does_not(tmp_path):
    rounds = [r for seed in range(RUNS) for r in _drifting_sweep(tmp_path, seed, rounds=5)]
    one_pass = [r for seed in range(RUNS) for r in _drifting_sweep(tmp_path, seed, rounds=1)]
    held, counted = _covered(rounds)
    assert counted >= 95 and held >= 88, (held, counted)  # nominal 95 in 100; 88 is 3 binomial sds below
    widths = sorted(r.knee.half_width or 0 for r in rounds if r.knee is not None)
    assert widths[len(widths) // 2] > 0.05  # it widened: the drift is inside it
    old_held, old_counted = _covered(one_pass)
    assert old_held <= 50, (old_held, old_counted)  # one pass: most knees get no interval or a wrong one


def test_a_ratio_paired_round_by_round_holds_through_a_drift_slower_than_the_run(tmp_path):
    # The machine's speed redrawn every 4 minutes: the rounds of one run mostly share it, so no interval
    # from inside the run can hold a knee at nominal speed, but two configurations measured side by side in a
    # round share it too, as the identity/gzip windows alternated by hand did (issue 20: both drifted 30%, their
    # difference did not), and their ratio holds.
    knees: list[ConfigResult] = []
    held = counted = 0
    truth = SimulatedEnvoy(limit_cores=0.5).true_knee(0.9) / SimulatedEnvoy(limit_cores=0.25).true_knee(0.9)
    for seed in range(20):
        configs = _drifting_run(tmp_path / str(seed), seed, rounds=5, segment_s=240).configs
        knees += configs
        small, large = sorted(configs, key=lambda c: c.envoy.cpu_cores)
        ratio = knee_ratio(large, small, 0.9)
        if ratio is not None:
            counted += 1
            held += ratio.low <= truth <= ratio.high
    knees_held, knees_counted = _covered(knees)
    assert counted >= 18 and held >= counted - 1, (held, counted)
    assert knees_held <= 0.7 * knees_counted, (knees_held, knees_counted)


def test_a_drift_faster_than_a_round_is_not_cancelled_by_pairing(tmp_path):
    # the limit of pairing, stated: when each visit sees its own machine speed, a ratio of two knees is as
    # uncertain as the two knees together, and its interval says so (it holds the truth, it is not narrower)
    held = wider = counted = 0
    for seed in range(20):
        configs = _drifting_sweep(tmp_path, seed, rounds=5)
        small, large = sorted(configs, key=lambda c: c.envoy.cpu_cores)
        truth = SimulatedEnvoy(limit_cores=0.5).true_knee(0.9) / SimulatedEnvoy(limit_cores=0.25).true_knee(0.9)
        ratio = knee_ratio(large, small, 0.9)
        if ratio is None or small.knee is None or small.knee.half_width is None:
            continue
        counted += 1
        held += ratio.low <= truth <= ratio.high
        wider += ratio.half_width >= small.knee.half_width
    # some runs under this drift get no interval for a knee (the product says so): the others are judged
    assert counted >= 15 and held >= counted - 2 and wider >= counted // 2, (held, wider, counted)


def test_the_control_window_reports_the_machines_drift_during_the_run(tmp_path):
    quiet = _drifting_run(tmp_path / "quiet", 0, rounds=5, drift=0.0)
    moving = _drifting_run(tmp_path / "moving", 0, rounds=5)
    calm, drifting = control_drift(quiet), control_drift(moving)
    assert calm is not None and drifting is not None
    assert len(calm.rounds) == len(drifting.rounds) == 5
    assert calm.spread < 0.02 < 0.05 < drifting.spread <= DRIFT * 1.2, (calm.spread, drifting.spread)


def test_rounds_past_the_planned_ones_stop_at_max_rounds_or_when_the_time_for_them_is_spent(tmp_path):
    # a drift of +-25% keeps some knees wider than +-8% after 3 rounds: those get more, up to max_rounds
    def run(name: str, **load: float) -> list[ConfigResult]:
        return [c for seed in range(6) for c in _drifting_run(tmp_path / name, seed, 3, 0.25, **load).configs]

    unlimited = run("unlimited", max_rounds=6)
    more = [c for c in unlimited if c.knee is not None and (c.knee.rounds or 0) > 3]
    assert more, [c.search for c in unlimited]
    for config in unlimited:
        rounds, width = config.knee.rounds or 0, config.knee.half_width or 1.0
        assert 3 <= rounds <= 6, config.search
        assert width <= 0.08 or (rounds == 6 and config.search.startswith("the most rounds done (load.max_rounds: 6)"))
    timed = run("timed", max_rounds=6, more_rounds_within_seconds=1)  # the planned rounds already took longer
    assert all(c.knee is not None and c.knee.rounds == 3 for c in timed), [c.search for c in timed]
    wide = [c for c in timed if (c.knee.half_width or 1.0) > 0.08]
    assert wide and all(c.search.startswith("no time for round 4 (load.more_rounds_within_seconds: 1)") for c in wide)
    assert all("at this run's scatter" in c.search for c in wide)  # and how many rounds would reach the target

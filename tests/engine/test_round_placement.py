"""Where a round puts its windows when the machine changed speed since the last round: the sweep engine on a
simulated Envoy (support.simulated) whose machine steps 20-25% slower or faster at every round, as a VM's CPU
per request moved 30% between two passes of one load (issue 20)."""

from __future__ import annotations

from pathlib import Path

from runner.knee import fit_windows
from runner.plan import plan_sweep
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import FakeClock, FakePlatform, SimulatedEnvoy

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

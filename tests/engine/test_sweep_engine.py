"""The sweep engine on a simulated platform and a fake clock: its behaviour in milliseconds.

Resume, a configuration failing, the failure policy, the time budget running out, Prometheus becoming
unreachable mid-run, guard verdicts, an interrupt, and the final status each have a test here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runner.errors import LoadGeneratorError, PlatformError, StopRun, UnreachableError
from runner.locust import Snapshot
from runner.plan import Configuration, plan_sweep
from runner.results import RunStore, load_summary
from runner.scenario import Scenario, parse_scenario
from runner.sweep import Sweep
from support.simulated import EPOCH, FakeClock, FakePlatform, SimulatedEnvoy

LOAD = {"step_seconds": 8, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "seed": 1}


def _scenario(**fields: object) -> Scenario:
    raw: dict[str, object] = {"name": "engine", "envoy": {"cpu": [0.25, 0.5]}, "load": dict(LOAD)}
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}  # type: ignore[dict-item]
        else:
            raw[key] = value
    return parse_scenario(raw)


def _envoy(config: Configuration) -> SimulatedEnvoy:
    return SimulatedEnvoy(limit_cores=config.envoy_cpu_cores, seed=round(config.envoy_cpu_cores * 1000))


def _sweep(tmp_path: Path, scenario: Scenario, platform: FakePlatform, store: RunStore | None = None) -> Sweep:
    store = store or RunStore.create(scenario, tmp_path)
    return Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock)


def test_a_sweep_finds_each_knee_near_the_simulated_one_and_ends_complete(tmp_path):
    clock = FakeClock()
    platform = FakePlatform(clock, _envoy)
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "complete"
    summary = load_summary(sweep.store.run_dir)
    assert summary.status == "complete" and summary.reason is None
    rounds = summary.rounds
    assert rounds is not None and rounds.planned == 5 and [r.number for r in rounds.rounds] == [1, 2, 3, 4, 5]
    for result in summary.configs:
        truth = SimulatedEnvoy(limit_cores=result.envoy.cpu_cores).true_knee(0.90)
        assert result.status == "saturated", result.reason
        knee = result.knee
        assert knee is not None and knee.method == "rounds" and knee.rounds == 5
        assert knee.low is not None and knee.high is not None and knee.low <= truth <= knee.high, (knee, truth)
        assert knee.rps == pytest.approx(truth, rel=0.05)
        assert {s.round for s in result.steps} == {1, 2, 3, 4, 5}  # every round visited it
        # round 1 locates; each later round measures its planned windows and a capacity probe at most
        assert len(result.steps) <= 12 + 4 * 3
    control = [s for c in summary.configs for s in c.steps if s.control]
    assert rounds.control is not None and len(control) == 5 and {s.round for s in control} == {1, 2, 3, 4, 5}
    assert all(s.target_rps == pytest.approx(rounds.control.offered) for s in control)  # one fixed rate
    assert platform.started == platform.stopped == 1
    assert clock.slept < 900  # simulated seconds: two configurations, five rounds, ~14 s a window


def test_rounds_visit_every_configuration_in_a_shuffled_order_that_a_seed_fixes(tmp_path):
    orders = []
    for attempt in ("a", "b"):
        scenario = _scenario(envoy={"cpu": [0.2, 0.25, 0.3, 0.4, 0.5]}, load={"seed": 7, "rounds": 3})
        sweep = _sweep(tmp_path / attempt, scenario, FakePlatform(FakeClock(), _envoy))
        sweep.run()
        record = sweep.store.summary.rounds
        assert record is not None and record.seed == 7
        orders.append([r.order for r in record.rounds])
        for number, order in enumerate(orders[-1], start=1):
            assert sorted(order) == sorted(c.key for c in sweep.plan.configurations), number
    assert orders[0] == orders[1]  # the seed fixes them
    assert len({tuple(order) for order in orders[0]}) > 1  # and they differ from round to round


def test_an_interrupted_sweep_resumes_where_it_stopped_and_keeps_every_window(tmp_path):
    scenario = _scenario()
    platform = FakePlatform(FakeClock(), _envoy)
    swarms = 0

    def interrupt_in_round_three() -> Exception | None:
        nonlocal swarms
        if len(platform.applied) == 6:  # the third round's second visit: warm-up, a window, then Ctrl-C
            swarms += 1
            if swarms == 3:
                raise KeyboardInterrupt
        return None

    platform.locust.fail_swarm = interrupt_in_round_three
    first = _sweep(tmp_path, scenario, platform)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    store = RunStore.open(first.store.run_dir)
    kept = {c.key: list(c.steps) for c in store.summary.configs}
    assert all(c.status == "running" for c in store.summary.configs) and all(kept.values())
    again = FakePlatform(FakeClock(), _envoy)
    assert _sweep(tmp_path, scenario, again, store).run() == "complete"
    summary = load_summary(store.run_dir)
    for config in summary.configs:
        assert config.status == "saturated" and config.steps[: len(kept[config.key])] == kept[config.key]
        assert {s.round for s in config.steps} == {1, 2, 3, 4, 5}
    # the visit cut short is made again, then rounds 4 and 5: no round is repeated
    assert len(again.applied) == 1 + 2 + 2
    assert [r.number for r in summary.rounds.rounds] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]


def test_resume_skips_finished_configurations_and_redoes_the_unfinished_one(tmp_path):
    scenario = _scenario(load={"rounds": 1})
    first = _sweep(tmp_path, scenario, FakePlatform(FakeClock(), _envoy))
    first.run()
    store = RunStore.open(first.store.run_dir)
    store.summary.configs[1].status = "running"  # as an interrupt leaves it
    store.summary.rounds.rounds[0].visited.pop()  # type: ignore[union-attr]
    kept = store.summary.configs[0].model_copy(deep=True)
    platform = FakePlatform(FakeClock(), _envoy)
    assert _sweep(tmp_path, scenario, platform, store).run() == "complete"
    assert [c.envoy_cpu_cores for c in platform.applied] == [0.5]  # only the unfinished one ran again
    summary = load_summary(store.run_dir)
    assert summary.configs[0] == kept and summary.configs[1].status == "saturated"


def test_a_configuration_that_fails_is_recorded_and_the_sweep_goes_on(tmp_path):
    def fail_first(config: Configuration) -> Exception | None:
        return PlatformError("rollout of projectcontour/envoy stuck") if config.envoy_cpu_cores == 0.25 else None

    platform = FakePlatform(FakeClock(), _envoy, fail_apply=fail_first)
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "partial"
    failed, done = sweep.store.summary.configs
    assert failed.status == "failed" and failed.reason == "rollout of projectcontour/envoy stuck"
    assert done.status == "saturated"
    assert (
        sweep.store.summary.reason is not None
        and "1 of 2 configuration(s) did not finish" in sweep.store.summary.reason
    )
    assert [c.envoy_cpu_cores for c in platform.applied].count(0.25) == 1  # a failed one is not visited again
    assert platform.recovered == len(platform.applied)  # dead parts are brought back before every visit


def test_on_failure_stop_ends_the_sweep_at_the_first_failure(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy, fail_apply=lambda config: PlatformError("no"))
    sweep = _sweep(tmp_path, _scenario(on_failure="stop"), platform)
    assert sweep.run() == "failed"
    assert len(platform.applied) == 1 and [c.status for c in sweep.store.summary.configs] == ["failed"]
    assert sweep.store.summary.reason is not None and "2 of 2" in sweep.store.summary.reason


def test_a_stop_run_error_ends_the_sweep_at_once_and_keeps_what_was_measured(tmp_path):
    def stop_at_the_second(config: Configuration) -> Exception | None:
        stop = StopRun("Gateway(s) x created during the run", "the run stops")
        return stop if config.envoy_cpu_cores == 0.5 else None

    platform = FakePlatform(FakeClock(), _envoy, fail_apply=stop_at_the_second)
    scenario = _scenario(envoy={"cpu": [0.25, 0.5, 0.75]}, load={"rounds": 1})  # on_failure: continue
    sweep = _sweep(tmp_path, scenario, platform)
    with pytest.raises(StopRun):
        sweep.run()
    summary = load_summary(sweep.store.run_dir)
    assert summary.status == "failed" and summary.reason == "Gateway(s) x created during the run: the run stops"
    first, stopped = summary.configs  # the third never begun
    assert first.status == "saturated" and first.steps
    assert stopped.status == "failed" and stopped.reason == summary.reason
    assert [c.envoy_cpu_cores for c in platform.applied] == [0.25, 0.5] and platform.stopped == 1


def test_a_lost_lease_found_behind_another_error_ends_the_sweep_at_once(tmp_path):
    # the Lease taken over by another run while the second configuration applies: its apply fails on what the other
    # run did (a plain PlatformError) and only the platform's check says why; the sweep must stop there, not apply
    # the third configuration to a gateway another run holds
    lost = StopRun("lease gateway-sizer on projectcontour/envoy was taken over by run other-run", "the run stops")
    platform = FakePlatform(FakeClock(), _envoy)
    platform.fail_apply = lambda config: PlatformError("patch refused") if config.envoy_cpu_cores == 0.5 else None

    def check() -> None:
        if len(platform.applied) >= 2:
            raise lost

    platform.check = check  # type: ignore[method-assign]
    scenario = _scenario(envoy={"cpu": [0.25, 0.5, 0.75]}, load={"rounds": 1})  # on_failure: continue
    sweep = _sweep(tmp_path, scenario, platform)
    with pytest.raises(StopRun) as stopped:
        sweep.run()
    assert [c.envoy_cpu_cores for c in platform.applied] == [0.25, 0.5] and platform.stopped == 1
    assert stopped.value is lost and isinstance(stopped.value.__cause__, PlatformError)
    summary = load_summary(sweep.store.run_dir)
    assert summary.status == "failed" and summary.reason == lost.one_line()
    first, second = summary.configs  # the third never begun
    assert first.status == "saturated" and second.status == "failed" and second.reason == lost.one_line()


def test_prometheus_unreachable_mid_run_fails_that_configuration_with_the_reason(tmp_path):
    clock = FakeClock()
    platform = FakePlatform(clock, _envoy)
    outage = (clock.time() + 20, clock.time() + 40)  # down for 20 s, in the first visit's second window
    platform.metrics.unreachable = lambda: outage[0] <= clock.time() < outage[1]
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "partial"
    first = next(c for c in sweep.store.summary.configs if c.key == platform.applied[0].key)
    [second] = [c for c in sweep.store.summary.configs if c is not first]
    assert first.status == "failed" and first.reason is not None and first.reason.startswith("Prometheus at")
    assert first.steps  # the windows measured before the outage are kept
    assert second.status == "saturated"


def test_the_time_budget_ends_a_configuration_and_says_so(tmp_path):
    scenario = _scenario(load={"max_seconds_per_config": 30})  # about three 12 s steps
    sweep = _sweep(tmp_path, scenario, FakePlatform(FakeClock(), _envoy))
    sweep.run()
    for result in sweep.store.summary.configs:
        assert len(result.steps) <= 3
        assert result.search is not None and "time budget" in result.search


def test_the_time_budget_counts_measuring_not_rollouts(tmp_path):
    # each apply a 1,000 s rollout (a slow DaemonSet drain on a real cluster): a budget that counted it would be
    # spent before round 2 measured anything
    scenario = _scenario(envoy={"cpu": [0.25]}, load={"max_seconds_per_config": 300, "rounds": 2})
    sweep = _sweep(tmp_path, scenario, FakePlatform(FakeClock(), _envoy, rollout_s=1000.0))
    sweep.run()
    [result] = sweep.store.summary.configs
    measured = [step.window_s for step in result.steps]
    assert {step.round for step in result.steps} == {1, 2}, (result.search, measured)
    assert sum(measured) <= 300, measured


def test_a_saturated_generator_makes_the_configuration_invalid_with_the_fix(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy)
    platform.timeline.generator_share = 0.95
    sweep = _sweep(tmp_path, _scenario(envoy={"cpu": [0.25]}), platform)
    sweep.run()
    [result] = sweep.store.summary.configs
    assert result.status == "invalid"
    assert result.reason is not None and "Locust worker at 95% CPU" in result.reason and "WORKERS=2" in result.reason
    assert len(result.steps) == 1  # more load cannot help while the generator is the limit


def test_an_interrupt_keeps_the_steps_and_stops_the_platform(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy)
    calls = 0

    def interrupt_on_the_fourth_swarm() -> Exception | None:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise KeyboardInterrupt
        return None

    platform.locust.fail_swarm = interrupt_on_the_fourth_swarm
    sweep = _sweep(tmp_path, _scenario(), platform)
    with pytest.raises(KeyboardInterrupt):
        sweep.run()
    summary = load_summary(sweep.store.run_dir)
    [started] = summary.configs  # the first one visited
    assert summary.status == "interrupted" and started.status == "running"
    assert len(started.steps) == 2  # warm-up, two measured levels, then the interrupt
    assert platform.stopped == 1


def test_a_load_generator_error_fails_only_its_configuration(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy)
    platform.locust.fail_swarm = lambda: (
        LoadGeneratorError("Locust refused to swarm") if not platform.applied[1:] else None
    )
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "partial"
    statuses = {c.key: c.status for c in sweep.store.summary.configs}
    assert statuses == {platform.applied[0].key: "failed", platform.applied[1].key: "saturated"}


def test_a_configuration_fails_with_the_part_that_died_not_with_what_its_death_caused_first(tmp_path):
    # the Locust master killed during the first configuration: the next call to its API fails before anything
    # notices the process is gone; the reason must name the dead part (a busy machine made this race real)
    platform = FakePlatform(FakeClock(), _envoy)

    def dead() -> bool:
        return not platform.applied[1:]

    platform.locust.fail_swarm = lambda: (
        UnreachableError("Locust master at http://fake unreachable (ConnectionError)", "check it") if dead() else None
    )

    def check() -> None:
        if dead():
            raise PlatformError("locust-master exited with code -9: killed", "see its log")

    platform.check = check  # type: ignore[method-assign]
    sweep = _sweep(tmp_path, _scenario(), platform)
    assert sweep.run() == "partial"
    results = {c.key: c for c in sweep.store.summary.configs}
    failed, finished = results[platform.applied[0].key], results[platform.applied[1].key]
    assert failed.status == "failed" and (failed.reason or "").startswith("locust-master exited with code -9"), failed
    assert finished.status == "saturated"


def test_a_window_the_load_did_not_run_through_is_measured_again_then_fails_the_configuration(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy)
    snapshots = 0
    real_snapshot = platform.locust.snapshot

    def master_restarts_in_the_second_window() -> Snapshot:
        nonlocal snapshots
        snapshots += 1
        snapshot = real_snapshot()
        return dataclasses.replace(snapshot, started_at=EPOCH + 1) if snapshots == 4 else snapshot

    platform.locust.snapshot = master_restarts_in_the_second_window  # type: ignore[method-assign]
    sweep = _sweep(tmp_path, _scenario(envoy={"cpu": [0.25]}), platform)
    sweep.run()
    [result] = sweep.store.summary.configs
    assert result.status == "saturated"  # the discarded window was measured again
    assert [s.index for s in result.steps] == list(range(len(result.steps)))

    stopped = FakePlatform(FakeClock(), _envoy)
    stopped.locust.snapshot = lambda: dataclasses.replace(real_snapshot(), state="stopped")  # type: ignore[method-assign]
    sweep = _sweep(tmp_path / "b", _scenario(envoy={"cpu": [0.25]}), stopped)
    assert sweep.run() == "failed"
    [result] = sweep.store.summary.configs
    assert result.reason == "the load was not running through the window (Locust's master is stopped)"


def test_the_live_state_follows_the_sweep_and_reaches_the_load_generator(tmp_path):
    platform = FakePlatform(FakeClock(), _envoy)
    sweep = _sweep(tmp_path, _scenario(envoy={"cpu": [0.25]}), platform)
    sweep.run()
    state = sweep.live.snapshot()
    [result] = sweep.store.summary.configs
    assert state["run_id"] == sweep.store.summary.run_id and state["status"] == "saturated"
    assert state["configuration"] == result.label and state["envoy_cpu_cores"] == 0.25
    assert len(state["windows"]) == len(result.steps)
    assert result.knee is not None and state["knee"]["rps"] == pytest.approx(result.knee.rps)
    assert platform.locust.beats  # the heartbeat carried it

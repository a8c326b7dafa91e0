"""End-to-end sweeps on the real local platform, through the CLI a user runs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from runner.figures import control_drift, knee_ratio
from runner.model import ConfigResult, RunSummary, Step
from runner.paths import PROJECT_ROOT
from runner.results import load_summary
from support.knees import assert_knee_says_how_it_was_found, assert_windows_bracket_the_knee
from support.processes import run_sizer
from support.scenarios import fixed_schedule_scenario
from support.selection import nightly_selected
from support.sweeps import assert_stopped_cleanly, latest_summary, start_sweep, wait_for_steps, wait_for_visits

# A fixed schedule for the signal tests: one round, one window per level (about 6 s each), so a signal sent after a
# configuration's first window lands while it still has LEVELS - 1 windows to go, whatever the machine's speed.
LEVELS = [200, 600, 1000, 1500, 2200]
LIMITS = (0.15, 0.3)  # the rounds run's Envoy limits (_rounds_scenario says why not the default's)


@dataclass(frozen=True)
class RoundsRun:
    """A default sweep in 3 rounds, stopped by Ctrl-C in round 1's second visit and resumed: what each part left."""

    interrupted: dict  # summary.json as the interrupted run left it
    resumed: subprocess.CompletedProcess[str]  # `sweep --resume`
    run_dir: Path
    summary: RunSummary  # the resumed run's


@pytest.fixture(scope="module")
def rounds_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RoundsRun:
    """One run for this file's two tests of it: the gate's (what the run does) and the nightly's (what it measured):
    3 rounds when the nightly one runs (an interval from the scatter between rounds needs 3), else 2."""
    tmp_path = tmp_path_factory.mktemp("rounds")
    # Ctrl-C once round 1's second visit is under way: everything stops, every window is kept, and `--resume` ends
    # the run as an uninterrupted one ends
    rounds = 3 if nightly_selected(request) else 2
    sweep = start_sweep(tmp_path, _rounds_scenario(tmp_path, rounds))
    started = wait_for_visits(sweep, tmp_path, visits=2)  # round 1's second visit is under way
    sweep.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    assert_stopped_cleanly(sweep, started, signal.SIGINT)
    interrupted = latest_summary(tmp_path)
    run_dir = (tmp_path / "latest").resolve()
    resumed = run_sizer("sweep", "--resume", str(run_dir), "--free-ports", timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert os.path.samefile(tmp_path / "latest", tmp_path / interrupted["run_id"])  # the same run, resumed
    return RoundsRun(interrupted, resumed, run_dir, load_summary(run_dir))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_sweep_in_rounds_stopped_by_ctrl_c_resumes_finds_both_knees_says_what_it_knows_and_writes_every_result(
    rounds_run: RoundsRun,
):
    interrupted, result, run_dir, summary = (
        rounds_run.interrupted,
        rounds_run.resumed,
        rounds_run.run_dir,
        rounds_run.summary,
    )
    assert interrupted["status"] == "interrupted" and interrupted["reason"] == "stopped by SIGINT (Ctrl-C)"
    kept = {c["key"]: c["steps"] for c in interrupted["configs"]}
    assert len(kept) == 2 and all(kept.values())  # both kept as measured
    assert all(c["status"] == "running" for c in interrupted["configs"])  # the later rounds are still to come
    [first_round] = interrupted["rounds"]["rounds"]
    assert len(first_round["visited"]) == 1  # the visit cut short is not counted
    # every figure, file and line of the console checked on the resumed run
    assert str(run_dir) in result.stdout  # the console says where the results are
    after = {c["key"]: c["steps"] for c in json.loads((run_dir / "summary.json").read_text())["configs"]}
    for key, steps in kept.items():
        assert after[key][: len(steps)] == steps  # what was measured before Ctrl-C stays
    assert summary.status == "complete" and summary.platform == "local"
    assert (summary.environment.versions.get("envoy") or "").startswith("1.")
    record = summary.rounds
    assert record is not None and record.planned >= 2  # 2 in the gate, 3 in make test-all
    rounds = list(range(1, record.planned + 1))
    assert [r.number for r in record.rounds] == rounds
    assert record.rounds[0].order == first_round["order"]  # round 1's recorded order, kept
    keys = sorted(c.key for c in summary.configs)
    assert all(sorted(r.order) == keys == sorted(r.visited) for r in record.rounds)  # every round visits all
    assert [c.envoy.cpu_cores for c in summary.configs] == list(LIMITS)
    for config in summary.configs:
        findings = [(s.rps, s.cpu_utilization_mean, s.guards) for s in config.steps if s.guards]
        assert config.status == "saturated", (config.reason, config.search, findings)
        # the knee is the rounds fit's, or (on a machine whose speed moved) one pass's or interpolated, and the
        # search line says which, and from how many rounds
        assert_knee_says_how_it_was_found(config, summary.threshold, planned=len(rounds))
        assert {s.round for s in config.steps} == set(rounds)
        assert all(s.cpu_utilization_max <= 1.03 for s in config.steps)  # the quota held
        for step in config.steps:
            if step.cpu_utilization_mean < 0.9 and not step.guards:  # past it Envoy is throttled, as guarded
                assert step.fail_ratio == 0.0
                assert abs(step.envoy_rps - step.rps) <= 0.05 * step.rps + 5, step
        if config.knee is not None and config.knee.interval is None:  # the product says why, results and console
            assert config.search is not None and "no interval" in config.search, config.search
        _assert_capacity_is_where_the_windows_broke(config, slo_ms=50)
    drift = control_drift(summary)
    small = summary.configs[0]
    windows = [(s.round, round(s.rps), f"{s.cpu_utilization_mean:.2f}", s.throttled_share, s.control)
               for s in small.steps]  # fmt: skip
    assert drift is not None and len(drift.rounds) == len(rounds), (record.control, windows)  # as it was planned
    assert drift.offered_rps == record.control.offered  # type: ignore[union-attr]
    assert f"speed moved +-{drift.spread:.1%}" in result.stdout  # the console states its noise
    with (run_dir / "steps.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(len(c.steps) for c in summary.configs)
    assert (run_dir / "scenario.yaml").is_file() and (run_dir / "logs" / "envoy-local.log").exists()
    # the report is written at the end of the sweep and carries its figures
    assert f"Report: {run_dir / 'report.html'}" in result.stdout
    md = (run_dir / "report.md").read_text()
    for config in summary.configs:
        assert config.knee is not None and f"{config.knee.rps:,.0f}" in md
    assert (run_dir / "report.html").stat().st_size > 50_000  # plots embedded
    assert len(list((run_dir / "plots").glob("*.png"))) >= 3


@pytest.mark.slow
@pytest.mark.nightly  # what the rounds measured: a machine whose speed moves mid-run moves every one of these
@pytest.mark.timeout(1200)
def test_the_resumed_sweeps_knees_come_from_the_rounds_and_scale_with_the_cpu_limit(rounds_run: RoundsRun):
    summary = rounds_run.summary
    assert summary.rounds is not None and summary.rounds.planned == 3
    for config in summary.configs:
        knee = config.knee
        # the rounds fit of 3 rounds, or of 2 when one dropped out of the fit (and the search line says so)
        assert knee is not None and knee.method == "rounds", (knee, config.search)
        assert_knee_says_how_it_was_found(config, summary.threshold, planned=3)
        assert_windows_bracket_the_knee(config)  # the knee, or its interval, where the windows say
    small, large = summary.configs
    assert small.knee is not None and large.knee is not None
    # the two knees against what the run was given, not what it computed from them: twice the CPU limit serves at
    # least 1.7 times the rate (Envoy's fixed costs make it 2 or more: 2.13-2.36 over five default runs of
    # 2026-11-26; 1.7 leaves the two knees' own scatter) and less than 6 times (4.1 on CI for 150m/300m, whose
    # smaller limit the fixed costs starve more). The ratio paired round by round, when there is one, says the same
    assert 1.7 <= large.knee.rps / small.knee.rps <= 6.0, (small.knee, large.knee)
    ratio = knee_ratio(large, small, summary.threshold)
    assert ratio is None or 1.7 <= ratio.value <= 6.0, ratio


def _broke(step: Step, slo_ms: float) -> bool:
    """A window that did not serve: short of its offered rate, p99 over the SLO, or failing."""
    return step.rps < 0.98 * step.offered or (step.p99_ms or 0) > slo_ms or step.fail_ratio > 0.01


def _assert_capacity_is_where_the_windows_broke(config: ConfigResult, slo_ms: float) -> None:
    """The capacity the run reports against its own windows: the rate it calls served was delivered in full with p99
    under the SLO, the rate it says broke was not, and no rate between them was served."""
    capacity = config.capacity
    if capacity is None:  # none served: then not even the lowest rate offered was, and the search line says so
        # (alone after make test-all, 2026-11-27: 150m's lowest window, 300 RPS, delivered 291, and two of three
        # windows at 420 RPS read p99 56 and 59 ms, the VM's speed moving between rounds)
        lowest = min(s.offered for s in config.steps)  # offered again in later rounds, as any rate may be
        at_lowest = [s for s in config.steps if s.offered == lowest]
        assert any(_broke(s, slo_ms) for s in at_lowest), at_lowest
        assert config.search is not None and "no rate served within the SLO" in config.search, config.search
        return
    served = [s for s in config.steps if s.target_rps == capacity.rps]
    # served in at least one window; another at that rate may have broken (a transient, as runner.capacity
    # judges it: the control window is measured at one rate in every round and can dip by chance)
    assert any(not _broke(s, slo_ms) for s in served), served
    if capacity.broken_at is None:
        assert config.search is not None and "capacity not reached" in config.search, config.search
        return
    # the search offers a rate again in a later round, so the rate that broke may also have been served in another
    # window (make test-all, 2026-11-27: 467 RPS at p99 23 ms in one round, 60 ms in another, the break counted)
    at_break = [s for s in config.steps if s.target_rps == capacity.broken_at]
    assert any(_broke(s, slo_ms) for s in at_break), at_break
    assert capacity.broken_by is not None and f"{capacity.broken_at:,.0f}" in capacity.broken_by, capacity
    between = [s for s in config.steps if capacity.rps < s.offered < capacity.broken_at]
    served_between = [s for s in between if not _broke(s, slo_ms)]
    assert not served_between, served_between  # the highest rate served is the capacity


def _rounds_scenario(tmp_path: Path, rounds: int) -> Path:
    """The default scenario (adaptive search, interleaved rounds, a control window) with shorter windows and `rounds`,
    and a 50 ms latency SLO: a throttled Envoy's p99 passes it near its limit (tens to hundreds of ms here). The
    search finds its loads from what it measures, so the windows straddle each knee on a machine of any speed. The
    limits are LIMITS, not the default 250m and 500m, so that the default's one Locust worker outruns Envoy past the
    larger knee with room (500m's knee near 2,900 RPS on 2026-11-27, windows to 3,400). The configurations that
    ended early that day were the worker-at-wall guard judging a limit under one core (fixed since), not the
    Locust worker."""
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["envoy"]["cpu"] = list(LIMITS)
    scenario["load"].update(step_seconds=4, warmup_seconds=2, settle_seconds=1, rounds=rounds, latency_slo_ms=50)
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.mark.slow
@pytest.mark.parallel_safe
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_a_sweep_as_ctrl_c_does(tmp_path: Path, signum: int):
    sweep = start_sweep(tmp_path, fixed_schedule_scenario(tmp_path, [0.15], LEVELS))
    started = wait_for_steps(sweep, tmp_path, config=0, steps=1)
    sweep.send_signal(signum)
    assert_stopped_cleanly(sweep, started, signum)
    summary = latest_summary(tmp_path)
    assert summary["status"] == "interrupted" and signal.Signals(signum).name in summary["reason"]
    assert summary["configs"][0]["status"] == "running" and summary["configs"][0]["steps"]


@pytest.mark.slow
@pytest.mark.parallel_safe
def test_sigint_stops_a_sweep_started_in_the_background_of_a_script(tmp_path: Path):
    sweep = start_sweep(tmp_path, fixed_schedule_scenario(tmp_path, [0.15], LEVELS), sigint_ignored=True)
    started = wait_for_steps(sweep, tmp_path, config=0, steps=1)
    sweep.send_signal(signal.SIGINT)  # `kill -INT <runner>`: honoured although the runner inherited it ignored
    assert_stopped_cleanly(sweep, started, signal.SIGINT)

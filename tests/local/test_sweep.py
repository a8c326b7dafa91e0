"""End-to-end sweeps on the real local platform, through the CLI a user runs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from sizer_testing import PROJECT_ROOT, SIZER, alive, cgroup_tree, run_sizer

STEP_FIELDS = {
    "users",
    "rps",
    "envoy_rps",
    "cpu_utilization_min",
    "cpu_utilization_mean",
    "cpu_utilization_max",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "fail_ratio",
}
# A fixed schedule of target rates, the same for every configuration, reaching past 0.3 CPU's knee: a
# configuration then takes one window per level (about 6 s each), so an interrupt sent after its first window
# lands while it still has LEVELS - 1 windows (about 25 s) to go, whatever the machine's speed.
LEVELS = [200, 600, 1000, 1500, 2200]


def _summary(results: Path) -> dict:
    return json.loads((results / "latest" / "summary.json").read_text())


@pytest.mark.slow
def test_sweep_finds_both_knees_and_writes_every_result(tmp_path: Path):
    # the default scenario's search with 5 s windows instead of 15 and at most 8 of them (a knee needs 2-4; short
    # windows scatter more, and one configuration's windows crossed the threshold out of order in a run)
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["load"].update(step_seconds=5, warmup_seconds=2, settle_seconds=1, max_steps=8)
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(scenario))
    command = ["sweep", "--scenario", str(tmp_path / "short.yaml"), "--envoy-cpus", "0.15,0.3", "--free-ports",
               "--results", str(tmp_path)]  # fmt: skip
    result = run_sizer(*command, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = (tmp_path / "latest").resolve()
    assert str(run_dir) in result.stdout  # the console says where the results are
    summary = _summary(tmp_path)
    assert {"run_id", "platform", "started_at", "finished_at", "environment", "configs"} <= set(summary)
    assert summary["status"] == "complete" and summary["platform"] == "local"
    assert summary["environment"]["versions"]["envoy"].startswith("1.")
    knees = []
    for config in summary["configs"]:
        assert config["status"] == "saturated", config["reason"]
        assert config["contour"] is None and config["backend"] == {"replicas": 1}
        assert config["steps"] and set(config["steps"][0]) >= STEP_FIELDS
        for step in config["steps"]:
            if step["cpu_utilization_mean"] < summary["threshold"]:  # past it, Envoy is throttled, as guarded
                assert step["fail_ratio"] == 0.0
                assert abs(step["envoy_rps"] - step["rps"]) <= 0.05 * step["rps"] + 5, step
        knees.append(config["knee"]["rps"])
    assert [c["envoy"]["cpu"] for c in summary["configs"]] == [0.15, 0.3]
    # Twice the CPU serves more than twice the RPS here: at 150m (15 ms of CPU per 100 ms period) Envoy's fixed
    # cost weighs more and CPU per request falls with load, and the 150m knee is the one that moves. Recorded:
    # 524 -> 1,804 (3.44x, tests/report/data/local-150m-300m), 598 -> 1,762 (2.95x), 366 -> 1,499 (4.09x, a CI
    # run on 2026-11-25), within 2.4x in other runs. The lower bound catches both configurations run at one cap (~1x) or
    # swapped caps (<1x). The upper bound is loose: past 6x, 150m would cost three times the CPU per request of 300m,
    # which no run came near (at most 2.05x).
    assert 1.6 <= knees[1] / knees[0] <= 6.0, knees
    with (run_dir / "steps.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(len(c["steps"]) for c in summary["configs"])
    assert (run_dir / "scenario.yaml").is_file() and (run_dir / "logs" / "envoy-local.log").exists()
    # the report is written at the end of the sweep and carries its figures
    assert f"Report: {run_dir / 'report.html'}" in result.stdout
    md = (run_dir / "report.md").read_text()
    assert "| Offered RPS | RPS | Envoy RPS | CPU utilization | CPU per request | Regime | p95 | p99 | Failures |" in md
    for config, knee in zip(summary["configs"], knees, strict=True):
        row = f"| {config['envoy']['cpu'] * 1000:.0f}m | 256Mi |"
        assert row in md and f"{knee:,.0f}" in md, (row, knee)
    assert (run_dir / "report.html").stat().st_size > 50_000  # plots embedded
    assert len(list((run_dir / "plots").glob("*.png"))) >= 3


def _sweep_pids(testbed_id: str) -> list[int]:
    pids = []
    for top in cgroup_tree(testbed_id):
        for procs in top.rglob("cgroup.procs"):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def _fixed_schedule_scenario(tmp_path: Path, cpus: list[float]) -> Path:
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["name"] = "interrupt"
    scenario["envoy"]["cpu"] = cpus
    scenario["load"].update(search="fixed", rps=LEVELS, step_seconds=3, warmup_seconds=2, settle_seconds=1)
    path = tmp_path / "interrupt.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _start_sweep(tmp_path: Path, cpus: list[float], *, sigint_ignored: bool = False) -> subprocess.Popen:
    command = [*SIZER, "sweep", "--scenario", str(_fixed_schedule_scenario(tmp_path, cpus)), "--free-ports"]
    return subprocess.Popen(
        [*command, "--results", str(tmp_path)],
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # what `cmd &` in a script does to its child: SIGINT ignored, inherited through exec
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )


def _wait_for_steps(sweep: subprocess.Popen, results: Path, config: int, steps: int) -> list[int]:
    """Wait until configuration `config` has `steps` steps saved; returns the test bed's pids seen."""
    testbed_id = f"sweep-{sweep.pid}"
    deadline = time.monotonic() + 300
    started: list[int] = []
    while time.monotonic() < deadline:
        time.sleep(0.5)
        assert sweep.poll() is None, sweep.communicate()
        started = _sweep_pids(testbed_id) or started
        summary_path = results / "latest" / "summary.json"
        if summary_path.exists():
            configs = json.loads(summary_path.read_text())["configs"]
            if len(configs) > config and len(configs[config]["steps"]) >= steps:
                return started
    pytest.fail(f"configuration {config + 1} did not measure {steps} step(s) in time")


def _assert_stopped_cleanly(sweep: subprocess.Popen, started: list[int], signum: int) -> str:
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and f"interrupted by {signal.Signals(signum).name}" in stderr
    assert len(started) >= 5  # Envoy, nginx, a Locust worker, the master, Prometheus, the exporter
    assert not alive(started), f"left running after {signal.Signals(signum).name}: {alive(started)}"
    assert not cgroup_tree(f"sweep-{sweep.pid}")
    return stderr


@pytest.mark.slow
def test_ctrl_c_stops_everything_keeps_finished_configs_and_resume_completes(tmp_path: Path):
    # Both configurations must get a knee inside LEVELS. At 150m this VM's knee moved from day to day between ~230
    # RPS (2026-11-25: 71-92% at 200 RPS in 6 runs, so a CI run's first configuration had no window below the
    # threshold) and 741; at 250m and 300m it stays above the first level (300m: 48% at 200 RPS) and below the last.
    sweep = _start_sweep(tmp_path, [0.3, 0.25])
    started = _wait_for_steps(sweep, tmp_path, config=1, steps=1)  # the second configuration is under way
    sweep.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    _assert_stopped_cleanly(sweep, started, signal.SIGINT)
    summary = _summary(tmp_path)
    assert summary["status"] == "interrupted"
    first, second = summary["configs"]
    assert first["status"] == "saturated" and first["knee"]["rps"] > 0
    assert len(first["steps"]) == len(LEVELS)  # a fixed schedule measures every level
    assert second["status"] == "running" and 1 <= len(second["steps"]) < len(LEVELS)  # kept as measured

    resumed = run_sizer("sweep", "--resume", str((tmp_path / "latest").resolve()), "--free-ports", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "already saturated in this run, skipped" in resumed.stdout
    after = _summary(tmp_path)
    assert after["status"] == "complete"
    assert after["configs"][0] == first  # untouched
    resumed_config = after["configs"][1]
    findings = [(s["rps"], s["cpu_utilization_mean"], s["guards"]) for s in resumed_config["steps"] if s["guards"]]
    assert resumed_config["status"] == "saturated", (resumed_config["reason"], findings)
    assert len(resumed_config["steps"]) == len(LEVELS)
    assert os.path.samefile(tmp_path / "latest", tmp_path / summary["run_id"])


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_a_sweep_as_ctrl_c_does(tmp_path: Path, signum: int):
    sweep = _start_sweep(tmp_path, [0.15])
    started = _wait_for_steps(sweep, tmp_path, config=0, steps=1)
    sweep.send_signal(signum)
    _assert_stopped_cleanly(sweep, started, signum)
    summary = _summary(tmp_path)
    assert summary["status"] == "interrupted" and signal.Signals(signum).name in summary["reason"]
    assert summary["configs"][0]["status"] == "running" and summary["configs"][0]["steps"]


@pytest.mark.slow
def test_sigint_stops_a_sweep_started_in_the_background_of_a_script(tmp_path: Path):
    sweep = _start_sweep(tmp_path, [0.15], sigint_ignored=True)
    started = _wait_for_steps(sweep, tmp_path, config=0, steps=1)
    sweep.send_signal(signal.SIGINT)  # `kill -INT <runner>`: honoured although the runner inherited it ignored
    _assert_stopped_cleanly(sweep, started, signal.SIGINT)

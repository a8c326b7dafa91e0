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


def _summary(results: Path) -> dict:
    return json.loads((results / "latest" / "summary.json").read_text())


@pytest.mark.slow
def test_sweep_finds_both_knees_and_writes_every_result(tmp_path: Path):
    result = run_sizer("sweep", "--envoy-cpus", "0.15,0.3", "--free-ports", "--results", str(tmp_path), timeout=900)
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
        assert 0.88 <= config["knee"]["cpu_utilization"] <= 1.0
        assert config["steps"] and set(config["steps"][0]) >= STEP_FIELDS
        for step in config["steps"]:
            assert step["fail_ratio"] == 0.0
            assert abs(step["envoy_rps"] - step["rps"]) <= 0.05 * step["rps"] + 5, step
        knees.append(config["knee"]["rps"])
    assert [c["envoy"]["cpu"] for c in summary["configs"]] == [0.15, 0.3]
    assert 1.6 <= knees[1] / knees[0] <= 2.4, knees
    with (run_dir / "steps.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(len(c["steps"]) for c in summary["configs"])
    assert (run_dir / "scenario.yaml").is_file() and (run_dir / "logs" / "envoy-local.log").exists()


def _sweep_pids(testbed_id: str) -> list[int]:
    pids = []
    for top in cgroup_tree(testbed_id):
        for procs in top.rglob("cgroup.procs"):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


@pytest.mark.slow
def test_ctrl_c_stops_everything_keeps_finished_configs_and_resume_completes(tmp_path: Path):
    command = [
        *SIZER,
        "sweep",
        "--envoy-cpus",
        "0.15,0.3",
        "--step-seconds",
        "3",
        "--free-ports",
        "--results",
        str(tmp_path),
    ]
    sweep = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    testbed_id = f"sweep-{sweep.pid}"
    deadline = time.monotonic() + 300
    started: list[int] = []
    while time.monotonic() < deadline:
        time.sleep(1)
        assert sweep.poll() is None, sweep.communicate()
        started = _sweep_pids(testbed_id) or started
        summary_path = tmp_path / "latest" / "summary.json"
        if summary_path.exists():
            configs = json.loads(summary_path.read_text())["configs"]
            if len(configs) == 2 and configs[1]["steps"]:
                break
    else:
        pytest.fail("the first configuration did not finish in time")
    assert len(started) >= 5  # Envoy, nginx, 2 workers, master, Prometheus, exporter
    sweep.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert not alive(started), f"left running after Ctrl-C: {alive(started)}"
    assert not cgroup_tree(testbed_id)
    summary = _summary(tmp_path)
    assert summary["status"] == "interrupted"
    first, second = summary["configs"]
    assert first["status"] == "saturated" and first["knee"]["rps"] > 0
    assert second["status"] == "running" and second["steps"]  # the steps measured so far are kept

    resumed = run_sizer("sweep", "--resume", str((tmp_path / "latest").resolve()), "--free-ports", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "already saturated in this run, skipped" in resumed.stdout
    after = _summary(tmp_path)
    assert after["status"] == "complete"
    assert after["configs"][0] == first  # untouched
    assert after["configs"][1]["status"] == "saturated"
    assert os.path.samefile(tmp_path / "latest", tmp_path / summary["run_id"])

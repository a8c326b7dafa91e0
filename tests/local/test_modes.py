"""The modes beyond the default adaptive sweep, each run for real: calibrate, the baseline, a fixed-load
schedule (Envoy CPU per 1,000 RPS) and a sweep over nginx replicas."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from support.processes import run_sizer

LEVELS = [400]  # one level: what the test checks of the fixed schedule, it checks window by window
# make test-all only: both verdicts move with the machine (the generator's absolute floor of 1,000 RPS, the direct path
# against the gateway's, the busiest replica's share of nginx's CPU); the gate's sweeps cover the fixed schedule
pytestmark = pytest.mark.nightly


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_calibrate_measures_the_generator_and_says_how_many_workers(tmp_path: Path):
    # shorter windows than local.yaml's (8 s, after 4 s of warm-up): a 2 s warm-up in the scenario and 4 s windows
    # through calibrate's own --step-seconds, which it takes like every sweep option
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["load"].update(warmup_seconds=2, settle_seconds=1)
    path = tmp_path / "calibrate.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run_sizer("calibrate", "--scenario", str(path), "--envoy-cpus", "0.25", "--step-seconds", "4",
                       "--free-ports", timeout=300, env={"GATEWAY_SIZER_CACHE": str(tmp_path)})  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    saved = json.loads((tmp_path / "calibration-local-lean.json").read_text())
    assert saved["generator_rps"] > 1000 and saved["rps_per_worker_core"] > saved["generator_rps"]
    assert 0 < saved["envoy_rps"] < saved["generator_rps"]  # Envoy at 250m serves less than nginx directly
    assert f"{saved['rps_per_worker_core']:,.0f} RPS per worker core" in result.stdout
    assert "the planned sweep (Envoy up to 0.25 CPU) needs WORKERS=1" in result.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_baseline_fixed_loads_and_a_replica_sweep_in_one_real_run(tmp_path: Path):
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["envoy"]["cpu"] = [0.25]
    scenario["backend"]["replicas"] = [1, 2]
    scenario["baseline"] = {"enabled": True, "users": 10}
    scenario["load"].update(search="fixed", rps=LEVELS, step_seconds=4, warmup_seconds=2, settle_seconds=1, rounds=1)
    path = tmp_path / "modes.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run_sizer("sweep", "--scenario", str(path), "--free-ports", "--results", str(tmp_path), timeout=800)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = (tmp_path / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())

    one, two = summary["configs"]
    assert (one["backend"]["replicas"], two["backend"]["replicas"]) == (1, 2)
    for config in (one, two):  # the fixed schedule, measured at each replica count
        assert [s["target_rps"] for s in config["steps"]] == LEVELS
    # Envoy round-robins: with two replicas the busiest one does about half the backend's work
    for step in two["steps"]:
        assert step["backend_cpu_max"] < 0.75 * step["backend_cpu_cores"], step

    baseline = summary["baseline"]
    direct, gateway = baseline["direct"]["rps"], baseline["gateway"]["rps"]
    assert direct > gateway > 0  # the gateway at 250m serves less than nginx alone
    report = (run_dir / "report.md").read_text()
    assert f"gateway overhead **{1 - gateway / direct:.0%}** of the throughput" in report
    step = one["steps"][0]
    per_1k = step["envoy_cpu_cores"] / step["rps"] * 1000
    assert f"| {step['target_rps']:,.0f} | {step['rps']:,.0f} | {step['envoy_cpu_cores']:.3f} |" in report
    assert f"| {per_1k:.3f} |" in report
    assert os.path.exists(run_dir / "report.html")

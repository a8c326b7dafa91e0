"""A sweep in the background, as a user starts one (`gateway-sizer sweep` on the local platform): started, waited on
until its windows are saved, stopped by a signal and checked to leave nothing behind."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.paths import PROJECT_ROOT
from support.processes import SIZER, alive, cgroup_tree

WAIT_S = 300  # for a sweep's windows to be saved, on a busy machine


def latest_summary(results: Path) -> dict:
    """summary.json of the newest run under `results`, as saved so far."""
    return json.loads((results / "latest" / "summary.json").read_text())


def sweep_pids(testbed_id: str) -> list[int]:
    """Every process in the test bed's cgroups."""
    pids = []
    for top in cgroup_tree(testbed_id):
        for procs in top.rglob("cgroup.procs"):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def start_sweep(results: Path, scenario: Path, *, sigint_ignored: bool = False) -> subprocess.Popen:
    """`gateway-sizer sweep --scenario <scenario> --free-ports --results <results>` in the background."""
    command = [*SIZER, "sweep", "--scenario", str(scenario), "--free-ports"]
    return subprocess.Popen(
        [*command, "--results", str(results)],
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # what `cmd &` in a script does to its child: SIGINT ignored, inherited through exec
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )


def wait_for_steps(sweep: subprocess.Popen, results: Path, config: int, steps: int) -> list[int]:
    """Wait until configuration `config` has `steps` steps saved; returns the test bed's pids seen."""

    def saved(configs: list[dict]) -> bool:
        return len(configs) > config and len(configs[config]["steps"]) >= steps

    return _wait_for(sweep, results, saved, f"configuration {config + 1} did not measure {steps} step(s) in time")


def wait_for_visits(sweep: subprocess.Popen, results: Path, visits: int) -> list[int]:
    """Wait until `visits` configurations have windows saved (the last one under way); returns the pids seen."""

    def saved(configs: list[dict]) -> bool:
        return sum(1 for c in configs if c["steps"]) >= visits

    return _wait_for(sweep, results, saved, f"{visits} configuration(s) did not measure a window in time")


def _wait_for(sweep: subprocess.Popen, results: Path, saved: Callable[[list[dict]], bool], late: str) -> list[int]:
    """Poll the run's summary.json until `saved(its configurations)`, the sweep still running; returns the test
    bed's pids seen meanwhile; fails with `late` after WAIT_S."""
    testbed_id = f"sweep-{sweep.pid}"
    deadline = time.monotonic() + WAIT_S
    started: list[int] = []
    while time.monotonic() < deadline:
        time.sleep(0.5)
        assert sweep.poll() is None, sweep.communicate()
        started = sweep_pids(testbed_id) or started
        summary_path = results / "latest" / "summary.json"
        if summary_path.exists() and saved(json.loads(summary_path.read_text())["configs"]):
            return started
    pytest.fail(late)


def assert_stopped_cleanly(sweep: subprocess.Popen, started: list[int], signum: int) -> str:
    """The sweep ended on `signum` as on Ctrl-C (its exit status, one line, no traceback) and left no process of
    its test bed running and no cgroup; returns its stderr."""
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and f"interrupted by {signal.Signals(signum).name}" in stderr
    assert len(started) >= 5  # Envoy, nginx, a Locust worker, the master, Prometheus, the exporter
    assert not alive(started), f"left running after {signal.Signals(signum).name}: {alive(started)}"
    assert not cgroup_tree(f"sweep-{sweep.pid}")
    return stderr

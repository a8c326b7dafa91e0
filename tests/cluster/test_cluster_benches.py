"""The benches that need the one-machine cluster run end to end with tiny sweeps, so none rots unnoticed
(tests/bench/test_benches_run.py runs the others). The figures of such short runs mean nothing; what is checked is
that each completes, exits 0 and prints the line its docstring quotes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.paths import PROJECT_ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.nightly  # two sweeps of the sizing fleet, one of them beside production's load: minutes
@pytest.mark.timeout(1800)
def test_fleet_isolation_runs_a_quiet_and_a_loaded_sweep_and_reads_production_s_counter(cluster):
    done = subprocess.run(
        [sys.executable, "bench/fleet_isolation.py", "--pairs", "1", "--rounds", "1", "--rps", "10", "--short"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=1700,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "production served" in line]
    assert len(lines) == 2 and lines[0].startswith("pair 1 quiet") and lines[1].startswith("pair 1 loaded"), lines
    assert "Traceback" not in done.stderr, done.stderr[-3000:]

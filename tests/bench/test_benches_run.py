"""Every script in bench/ runs end to end, with tiny durations (and tiny sweeps), so none rots unnoticed.

The figures of such short runs mean nothing; what is checked is that each script completes, exits 0,
prints the line its README entry quotes and leaves nothing in its temporary folder ($TMPDIR).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BENCH = PROJECT_ROOT / "bench"

# Longest first (in the bench tier on 2026-11-27: knee_truth 94 s down to machine_speed 6 s), so that the tier's two
# workers end together: pytest-xdist hands the scripts out in this order, each worker its next as it gets through its
# own, and a long one handed out last would run on alone.
CASES = {
    "knee_truth.py": (
        ["--caps", "0.25", "--runs", "1", "--rounds", "3", "--seconds", "1"],
        "cap 0.25 workers 1: the generator",
    ),
    "arrivals.py": (["--rounds", "1", "--models", "poisson,synchronized"], "medians of 1 round"),
    "search_cost.py": (["--repeats", "1"], "ratio ramp / adaptive"),
    "repeatability.py": (["--runs", "1", "--caps", "0.25"], "windows per configuration"),
    "meter_bias.py": (["--shares", "0.5", "--rounds", "1", "--seconds", "2"], "rounds)"),
    "worker_threads.py": (["--passes", "1", "--shares", "0.6,0.9", "--seconds", "2"], "paired pass by pass"),
    "interrupts.py": (["--trials", "1", "--seed", "3"], "1 interrupts: leaks"),
    "send_clustering.py": (["--rates", "500", "--rounds", "1", "--seconds", "2", "--timers", "fine/gevent"], "rounds)"),
    "handshake_cost.py": (["--runs", "1"], "handshake / keep-alive median"),
    "harness_overhead.py": (["--rounds", "1", "--window", "2"], "inside / bare"),
    "soak.py": (["--minutes", "0.3", "--every", "1", "--rps", "100"], "open files"),
    "many_workers.py": (["--workers", "3", "--rps", "150", "--seconds", "2"], "workers seen missing: 0"),
    "noise.py": (["--caps", "0.25", "--shares", "0.5", "--passes", "2", "--seconds", "1"], "us/control"),
    "openloop_check.py": (["--seconds", "1"], "cpu      synchronized"),
    "generator_efficiency.py": (
        ["--rounds", "1", "--window", "1", "--warmup", "1", "--paced-users", "200"],
        "paced:       lean / FastHttpUser",
    ),
    "machine_speed.py": (["--minutes", "0.1", "--every", "0.5"], "one-minute medians"),
}
CLUSTER_BENCHES = {"fleet_isolation.py"}  # need the one-machine cluster: tests/cluster/test_cluster_benches.py


def test_every_bench_script_is_covered():
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_") and p.name != "openloop.py"}
    # openloop.py is the generator's helper module, tested in test_openloop.py
    assert scripts == set(CASES) | CLUSTER_BENCHES


@pytest.mark.slow
@pytest.mark.nightly  # make test-all: the benches measure, and each drives load that a gate's 20 minutes cannot hold
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", list(CASES))
def test_the_bench_runs_with_tiny_durations(script: str, tmp_path: Path):
    args, expected = CASES[script]
    tmp = tmp_path / "tmp"  # the script's own $TMPDIR: whatever it leaves there, it left
    tmp.mkdir()
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "GATEWAY_SIZER_BENCH_TINY": "1", "TMPDIR": str(tmp)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not any(tmp.iterdir()), f"{script} left in its $TMPDIR: {_left(tmp)}"


def _left(folder: Path) -> str:
    """ "gateway-sizer-truth-x1y2/ (41 files), core.1234": what is in a folder, a subfolder with its file count."""
    return ", ".join(
        f"{path.name}/ ({sum(1 for p in path.rglob('*') if not p.is_dir())} files)" if path.is_dir() else path.name
        for path in sorted(folder.iterdir())
    )

"""The memory model end to end on the real local platform, through the CLI a user runs: a memory-only sweep
interrupted by SIGTERM and resumed, its points, fits, report and `recommend --connections`."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from support.processes import SIZER, alive, cgroup_tree, run_sizer
from support.scenarios import CONNECTIONS, ROUTES, memory_scenario


def _summary(results: Path) -> dict:
    return json.loads((results / "latest" / "summary.json").read_text())


def _pids(testbed_id: str) -> list[int]:
    return [int(p) for top in cgroup_tree(testbed_id) for f in top.rglob("cgroup.procs") for p in f.read_text().split()]


def _measured(results: Path) -> list[dict]:
    path = results / "latest" / "summary.json"
    memory = json.loads(path.read_text()).get("memory") if path.exists() else None
    return [p for p in (memory or {}).get("points", []) if p["status"] == "measured"]


@pytest.mark.slow
@pytest.mark.parallel_safe
def test_memory_sweep_survives_sigterm_resumes_and_fits_the_working_set(tmp_path: Path):
    command = [
        *SIZER,
        "sweep",
        "--scenario",
        str(memory_scenario(tmp_path)),
        "--free-ports",
        "--results",
        str(tmp_path),
    ]
    sweep = subprocess.Popen(command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    started: list[int] = []
    deadline = time.monotonic() + 300
    while len(_measured(tmp_path)) < 2:  # (0, 0) and (500, 0): the third point is opening its connections
        assert sweep.poll() is None, sweep.communicate()
        assert time.monotonic() < deadline, "no memory point measured in time"
        started = _pids(f"sweep-{sweep.pid}") or started
        time.sleep(0.5)
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted by SIGTERM" in stderr and "Traceback" not in stderr
    assert len(started) >= 5 and not alive(started), f"left running: {alive(started)}"
    assert not cgroup_tree(f"sweep-{sweep.pid}")
    interrupted = _summary(tmp_path)
    assert interrupted["status"] == "interrupted" and interrupted["configs"] == []
    kept = {p["key"]: p for p in interrupted["memory"]["points"] if p["status"] == "measured"}
    assert {"connections=0,routes=0", "connections=500,routes=0"} <= set(kept)

    run_dir = (tmp_path / "latest").resolve()
    resumed = run_sizer("sweep", "--resume", str(run_dir), "--free-ports", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "memory: 500 held connections, 0 extra routes: already measured in this run, skipped" in resumed.stdout
    summary = _summary(tmp_path)
    assert summary["status"] == "complete", summary["reason"]
    points = {p["key"]: p for p in summary["memory"]["points"]}
    assert len(points) == len(CONNECTIONS) + len(ROUTES) - 1 and all(p["status"] == "measured" for p in points.values())
    for key, point in kept.items():
        assert points[key] == point  # measured once, not again
    memory = summary["memory"]
    assert memory["cgroup_version"] in (1, 2) and memory["envoy_memory"] == "512Mi" and memory["envoy_cpu"] == 0.5
    by_connections = [points[f"connections={c},routes=0"] for c in CONNECTIONS]
    for point in by_connections:
        assert point["held"] == point["connections"], point  # the holder held every connection
        assert point["envoy_connections"] >= point["connections"], point  # and Envoy saw them all
        assert point["heap_bytes"] > 0 and point["allocated_bytes"] > 0 and point["envoy_rps"] > 0
    working_sets = [p["working_set_bytes"] for p in by_connections]
    assert working_sets == sorted(working_sets), working_sets  # more connections, more memory
    assert (working_sets[-1] - working_sets[0]) / 2000 > 4 * 2**10, working_sets  # several KiB each
    many_routes = points["connections=0,routes=1000"]
    assert many_routes["envoy_rps"] > 10 and many_routes["envoy_cpu_cores"] > 0

    report = (run_dir / "report.md").read_text()
    assert "## Memory" in report and "KiB per connection" in report and "MiB per 1,000 routes" in report
    assert (run_dir / "plots" / "memory_vs_connections.png").stat().st_size > 10_000
    assert (run_dir / "plots" / "memory_vs_routes.png").stat().st_size > 10_000
    advice = run_sizer("recommend", "--connections", "1500", "--routes", "500", "--run", str(run_dir))
    assert advice.returncode == 0, advice.stderr
    assert "Envoy memory for 1,500 held connections and 500 routes" in advice.stdout
    assert "--overload-downstream-max-conn=" in advice.stdout and "--overload-max-heap=" in advice.stdout
    manifest = run_sizer("recommend", "--connections", "1500", "--output", "yaml", "--run", str(run_dir))
    assert manifest.returncode == 0, manifest.stderr
    container = yaml.safe_load(manifest.stdout)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
    assert "--overload-downstream-max-conn=" in manifest.stdout

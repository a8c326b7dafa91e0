"""Each validity guard provoked for real on the local platform, and the verdict it leads to: every test names
the one guard its fault must fire first (the verdict's reason is that guard's message).

The guards that compare counts (failures, Envoy's RPS against the client's, new connections per request) fire on
loads far below every limit, whatever runs beside them: those tests are parallel_safe. The two that drive a
process to its CPU quota (a Locust worker, nginx) stay with the tests that measure CPU, one at a time: a busy CPU
beside them could hold that process below its quota, and another guard, or none, would speak first."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from runner.paths import PROJECT_ROOT, state_dir
from support.processes import SIZER, run_sizer
from support.project import bench_module

pytestmark = pytest.mark.slow
ONE_ROUND = {"step_seconds": 4, "warmup_seconds": 2, "settle_seconds": 2, "max_steps": 6, "rounds": 1}


def _scenario(tmp_path: Path, **sections: dict) -> Path:
    load = {**ONE_ROUND, **sections.pop("load", {})}
    scenario = {"name": "guard", "envoy": {"cpu": [0.5]}, **sections, "load": load}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _sweep(tmp_path: Path, **sections: dict) -> dict:
    path = _scenario(tmp_path, **sections)
    result = run_sizer("sweep", "--scenario", str(path), "--free-ports", "--results", str(tmp_path / "r"), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((tmp_path / "r" / "latest" / "summary.json").read_text())["configs"][0]


def _first_guard(config: dict) -> str:
    """The guard the verdict names: the first finding of the first window that has one."""
    return next(s["guards"][0]["guard"] for s in config["steps"] if s["guards"])


def _background_sweep(tmp_path: Path, **sections: dict) -> tuple[subprocess.Popen, str]:
    """A sweep started in the background; returns it and its gateway's URL once its first window is saved."""
    command = [*SIZER, "sweep", "--scenario", str(_scenario(tmp_path, **sections)), "--free-ports",
               "--results", str(tmp_path / "r")]  # fmt: skip
    sweep = subprocess.Popen(command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    summary = tmp_path / "r" / "latest" / "summary.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert sweep.poll() is None, sweep.communicate()
        configs = json.loads(summary.read_text())["configs"] if summary.exists() else []
        if configs and configs[0]["steps"]:
            record = json.loads((state_dir() / f"sweep-{sweep.pid}.json").read_text())
            return sweep, record["urls"]["gateway"]
        time.sleep(0.3)
    sweep.kill()
    pytest.fail("the sweep measured no window in 180 s")


def _finish(sweep: subprocess.Popen, tmp_path: Path) -> dict:
    _out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 0 and "Traceback" not in err, err[-2000:]
    return json.loads((tmp_path / "r" / "latest" / "summary.json").read_text())["configs"][0]


@pytest.mark.nightly  # drives a process to its quota: a busy or slow machine moves which guard speaks first
def test_one_fasthttp_worker_held_to_a_quarter_core_in_a_closed_loop_is_generator_saturated(tmp_path):
    # 50 FastHttpUsers with no wait keep their one worker busy whatever the machine; held to a quarter of a core
    # (load.worker_cpu) it uses all of that quota while Envoy, with a whole core, serves what it sends far below
    # the threshold: on a fast machine or a slow one (not parallel_safe: a quota is a ceiling, and a busy CPU
    # beside the worker could keep it under 90% of it)
    closed_loop = {"client": "fasthttp", "workers": 1, "worker_cpu": 0.25, "mode": "users", "search": "fixed",
                   "users": [50]}  # fmt: skip
    config = _sweep(tmp_path, envoy={"cpu": [1]}, load=closed_loop)
    assert config["status"] == "invalid" and _first_guard(config) == "generator-saturated", config["steps"]
    assert config["reason"].startswith("load generator saturated: a Locust worker at"), config["reason"]
    assert "add Locust workers" in config["reason"]
    assert max(s["cpu_utilization_mean"] for s in config["steps"]) < 0.9, config["steps"]


@pytest.mark.nightly  # drives a process to its quota: a busy or slow machine moves which guard speaks first
def test_nginx_capped_far_below_envoy_is_backend_saturated(tmp_path):
    # nginx spends a fraction of Envoy's CPU per request, and both scale with the machine: held to 40m, a twelfth
    # of Envoy's 500m, it saturates while Envoy is far from its threshold on any machine. start_rps only sets
    # where the adaptive search begins; it grows from there until a guard fires (not parallel_safe: nginx starved
    # below its quota by a busy CPU would answer late, and the shortfall guard could fire first)
    config = _sweep(tmp_path, backend={"cpu": 0.04}, load={"start_rps": 600})
    assert config["status"] == "invalid" and _first_guard(config) == "backend-saturated", config["steps"]
    assert config["reason"].startswith("backend saturated: an nginx replica at"), config["reason"]


@pytest.mark.parallel_safe  # every request fails in the first window: no CPU figure decides it
def test_a_backend_answering_errors_fails_the_failure_guard(tmp_path):
    config = _sweep(tmp_path, backend={"response_status": 503}, load={"start_rps": 200})
    assert config["status"] == "invalid" and _first_guard(config) == "failures"
    assert config["steps"][0]["fail_ratio"] == 1.0
    assert config["reason"].startswith("100.0% of requests failed")


@pytest.mark.parallel_safe  # two counts of one load, 4x apart, far below the threshold
@pytest.mark.nightly  # a second guard of the same kind as the failures one; needs the bench's Go generator
def test_load_that_reaches_envoy_past_locust_fires_the_rps_mismatch_guard(tmp_path):
    # Locust offers 100 RPS; once its first window is saved, the open-loop generator (bench/openloop) adds 300 RPS
    # of its own at the same gateway for 14 s (2 s of warm-up, 12 measured): Envoy counts four times what the client
    # does, at a utilization far below the threshold (400 RPS at 500m). The second window starts 2-3 s after the
    # first is saved and lasts 4 s, inside the foreign load; the third is spare. The generator is built before
    # the sweep starts, so a first build (tens of seconds) cannot delay the foreign load past the windows.
    binary = bench_module("openloop").build()
    sweep, gateway = _background_sweep(tmp_path, load={"search": "fixed", "rps": [100, 100, 100]})
    foreign = subprocess.run([str(binary), "--url", gateway, "--rate", "300", "--duration", "12", "--arrivals",
                              "poisson"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert foreign.returncode == 0, foreign.stderr
    config = _finish(sweep, tmp_path)
    assert config["status"] == "invalid" and _first_guard(config) == "rps-mismatch", config["steps"]
    assert config["reason"].startswith("client counted "), config["reason"]


@pytest.mark.parallel_safe  # new connections per request, 0.5 against a limit of 0.05, far below the threshold
@pytest.mark.nightly  # a second guard of the same kind as the failures one
def test_connections_reset_under_a_keepalive_profile_fire_the_connections_off_profile_guard(tmp_path):
    # A middlebox resetting connections: once the first window is saved, every established connection to the
    # gateway is destroyed (ss -K) every 2 s for 12 s; the lean client connects again before its next request, so
    # Envoy accepts one new connection per user every 2 s (0.5 per request at 1 RPS per user) on a profile that
    # asks for none, while a request is rarely in flight when its connection goes (1 ms of every second). The
    # second window (2-3 s after the first is saved, 4 s long) falls inside the resets; the third is spare.
    load = {"search": "fixed", "rps": [200, 200, 200], "max_rps_per_user": 1}
    sweep, gateway = _background_sweep(tmp_path, load=load)
    port = urlsplit(gateway).port
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        killed = subprocess.run(["ss", "-K", "dst", "127.0.0.1", "dport", "=", f":{port}"], capture_output=True,
                                text=True, timeout=10)  # fmt: skip
        assert killed.returncode == 0, f"ss -K cannot destroy sockets here (CONFIG_INET_DIAG_DESTROY?): {killed.stderr}"
        time.sleep(2)
    config = _finish(sweep, tmp_path)
    assert config["status"] == "invalid" and _first_guard(config) == "connections-off-profile", config["steps"]
    assert "on a keep-alive profile" in config["reason"], config["reason"]

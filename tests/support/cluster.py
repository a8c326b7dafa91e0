"""Helpers of the tests on the real one-machine cluster: make targets and k8s/'s scripts, the CLI in the
background, scenario files, what a run shows through the API server (its Locust master, its live state), the
daemons' pids, the TLS profiles' schedule."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.loadgen import MASTER
from runner.platforms.kubernetes.objects import RUN_LABEL, label_value
from support.project import CACHE
from support.wait import until

STATE = CACHE / "cluster" / "state"
ENVOY = workloads.Workload("DaemonSet", "projectcontour", "envoy", "envoy")
NGINX = workloads.Workload("Deployment", "gateway-loadtest", "nginx", "nginx")
PROMETHEUS = "http://10.96.0.90:9090"
STARTED_BY_TESTS = "GATEWAY_SIZER_TESTS_STARTED_CLUSTER"  # set when this pytest session brought the cluster up
# The TLS profiles at Envoy 300m on a fixed schedule, for the tests that check how a run serves them, not where a
# knee is: two rates below every profile's knee there (tls-new-connection's was ~245 RPS on the cluster on
# 2026-11-26), so each window is served in full, and far apart, so the CPU one more request adds (the slope
# between them, runner.figures.added_us_per_request) stands clear of what Envoy spends with no load. Uniform
# arrivals: a window holds its rate times its length in requests, not a Poisson count. 8 s windows hold 4-5 of
# Prometheus' 2 s scrapes.
TLS_FIXED = {"envoy.cpu": [0.3], "load.rounds": 1, "load.search": "fixed", "load.rps": [30, 120],
             "load.arrivals": "uniform", "load.step_seconds": 8, "load.warmup_seconds": 3,
             "load.settle_seconds": 1}  # fmt: skip


def run(
    cmd: list[str], timeout: float, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run a command (one of k8s/'s scripts) from the repository root, capturing text output; fail with its
    stderr tail."""
    proc = subprocess.run(
        cmd,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def make(target: str, timeout: float) -> str:
    result = subprocess.run(
        ["make", "-f", "k8s/cluster.mk", target],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def sizer(*args: str, kubeconfig: Path, results: Path) -> subprocess.Popen[str]:
    """`gateway-sizer sweep ...` as a user runs it, in the background (its pid is the runner's)."""
    return subprocess.Popen(
        [sys.executable, "-m", "runner", "sweep", *args, "--results", str(results)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )


def stop_cleanly(sweep: subprocess.Popen[str], how: signal.Signals = signal.SIGTERM, timeout_s: float = 600) -> None:
    """A sweep still running when its test ends (an assertion failed first) stopped as a user would, so that it
    restores the gateway itself; killed only if it has not ended after `timeout_s`."""
    if sweep.poll() is not None:
        return
    sweep.send_signal(how)
    try:
        sweep.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        sweep.kill()
        sweep.communicate()


def scenario_file(folder: Path, base: str = "local.yaml", **changes: Any) -> Path:
    """scenarios/<base> (local.yaml, or gateway-api.yaml) on the kubernetes platform, with `changes` (dotted keys)
    applied."""
    data = yaml.safe_load((PROJECT_ROOT / "scenarios" / base).read_text())
    data["platform"] = "kubernetes"
    data["envoy"].pop("isolation", None)
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        node = data
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    target = folder / "scenario.yaml"
    target.write_text(yaml.safe_dump(data))
    return target


def run_dir_of(results: Path, timeout_s: float = 120) -> Path:
    """The run directory a sweep writing into `results` made (results/latest)."""
    until((results / "latest" / "summary.json").exists, timeout_s, "the sweep's run directory", poll_s=0.5)
    return (results / "latest").resolve()


def master_url(admin: Cluster, run_id: str) -> str:
    """The API server's proxy to the web UI of the Locust master of run `run_id`."""
    services = admin.core.list_namespaced_service(
        "gateway-loadtest", label_selector=f"{RUN_LABEL}={label_value(run_id)}"
    )
    names = [s.metadata.name for s in services.items if s.metadata.name.startswith(MASTER)]
    assert names, f"no Locust master Service for run {run_id}"
    return admin.service_proxy_url("gateway-loadtest", names[0], 8089)


def wait_for_state(admin: Cluster, run_id: str, predicate, timeout_s: float, what: str) -> dict[str, Any]:
    """Poll the state the runner sends the Locust master with its heartbeats until `predicate(state)`."""
    session = admin.session()

    def state() -> dict[str, Any]:
        try:
            response = session.get(master_url(admin, run_id) + "/gateway-sizer/state", timeout=5)
            return response.json().get("state", {}) if response.ok else {}
        except (AssertionError, ValueError, OSError):  # no Master Service yet, or it is not answering yet
            return {}

    return until(state, timeout_s, what, ready=lambda seen: bool(seen) and predicate(seen), poll_s=1.0)


def daemon_pid(name: str) -> int:
    """The pid cluster-up recorded for one of its daemons."""
    return int((STATE / "pids" / name).read_text().split()[0])

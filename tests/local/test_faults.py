"""Faults injected for real into local sweeps: components killed or frozen mid-configuration, Prometheus
answering 5xx, the runner killed hard, a full disk. Each test asserts the run's status, exit code, the
steps kept, the failed configuration's reason, and that nothing is left running.

Faults land at points the tests control: each configuration follows a fixed schedule of LEVELS in one round,
and a fault is injected once a configuration's first window is saved, while it still has windows to go.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from runner.platforms.local.cgroups import ROOT_NAME, detect_driver
from support.processes import SIZER, alive, cgroup_tree, run_sizer

pytestmark = pytest.mark.parallel_safe  # statuses, reasons and leftovers, at rates far below every knee
LEVELS = [150, 250, 350]  # three short windows per configuration (about 6 s each), below the knee
PROXY_TIMEOUT_S = 60.0  # longer than the runner's 10 s read timeout: a frozen Prometheus times out there


def _scenario(tmp_path: Path, cpus: list[float], **extra: object) -> Path:
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario.update(name="faults", **extra)
    scenario["envoy"]["cpu"] = cpus
    scenario["load"].update(search="fixed", rps=LEVELS, step_seconds=3, warmup_seconds=1, settle_seconds=1, rounds=1)
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _start(tmp_path: Path, scenario: Path) -> subprocess.Popen:
    command = [*SIZER, "sweep", "--scenario", str(scenario), "--free-ports", "--results", str(tmp_path)]
    return subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _summary(results: Path) -> dict:
    path = results / "latest" / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {"configs": []}


def _wait_for_first_window(sweep: subprocess.Popen, results: Path, config: int, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert sweep.poll() is None, sweep.communicate()
        configs = _summary(results)["configs"]
        if len(configs) > config and configs[config]["steps"]:
            return
        time.sleep(0.3)
    pytest.fail(f"configuration {config + 1} measured no window in {timeout_s:.0f} s")


def _wait_for_status(sweep: subprocess.Popen, results: Path, config: int, status: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert sweep.poll() is None, sweep.communicate()
        configs = _summary(results)["configs"]
        if len(configs) > config and configs[config]["status"] == status:
            return
        time.sleep(0.3)
    pytest.fail(f"configuration {config + 1} did not become {status} in {timeout_s:.0f} s")


def _pod_pids(sweep_pid: int, pod: str) -> list[int]:
    driver = detect_driver()
    procs = driver.mounts["cpu" if driver.version == 1 else "unified"] / ROOT_NAME / f"sweep-{sweep_pid}" / pod
    return [int(p) for p in (procs / "cgroup.procs").read_text().split()]


def _kill(sweep_pid: int, pod: str, signum: int = signal.SIGKILL) -> None:
    for pid in _pod_pids(sweep_pid, pod):
        os.kill(pid, signum)


def _all_pids(sweep_pid: int) -> list[int]:
    return [int(p) for top in cgroup_tree(f"sweep-{sweep_pid}") for f in top.rglob("cgroup.procs")
            for p in f.read_text().split()]  # fmt: skip


def _finish(sweep: subprocess.Popen, timeout_s: float = 600) -> tuple[str, str]:
    started = _all_pids(sweep.pid)
    out, err = sweep.communicate(timeout=timeout_s)
    assert "Traceback" not in err, err
    assert not alive(started), f"left running: {alive(started)}"
    assert not cgroup_tree(f"sweep-{sweep.pid}")
    return out, err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_component_killed_mid_configuration_fails_that_one_and_is_restarted_for_the_next(tmp_path: Path):
    killed = ("envoy-local", "locust-worker-0", "nginx-0", "locust-master")
    sweep = _start(tmp_path, _scenario(tmp_path, [0.25, 0.26, 0.27, 0.28, 0.29]))
    for config, pod in enumerate(killed):
        _wait_for_first_window(sweep, tmp_path, config)
        _kill(sweep.pid, pod)
    out, err = _finish(sweep)
    assert sweep.returncode == 1, err
    summary = _summary(tmp_path)
    statuses = [(c["status"], c["reason"] or "") for c in summary["configs"]]
    for (status, reason), pod in zip(statuses, killed, strict=False):
        assert status == "failed" and reason.startswith(f"{pod} exited with code -9"), statuses
    assert all(c["knee"] is None for c in summary["configs"][:4]), statuses  # a cut-short window is no knee
    assert statuses[4][0] in ("saturated", "not-saturated"), statuses  # finished, after the restarts
    assert len(summary["configs"][4]["steps"]) == len(LEVELS)
    assert all(c["steps"] for c in summary["configs"])  # the windows measured before each fault are kept
    assert summary["status"] == "partial" and "4 of 5 configuration(s) did not finish" in summary["reason"]
    for pod in killed[1:]:
        assert f"restarted {pod}" in out, out
    # one line says how the run ended; the make test tier that runs two of these tests at once may add the warning
    # that another test bed shares the machine
    lines = [line for line in err.splitlines() if "another local test bed is running" not in line]
    assert len(lines) == 1 and "run partial" in lines[0], err


@contextmanager
def _proxy(target: Callable[[], str | None]) -> Iterator[tuple[str, threading.Event]]:
    """An HTTP proxy to the URL `target()` names, answering 503 while the event is set."""
    failing = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            upstream = target()
            if failing.is_set() or upstream is None:
                self.send_response(503)
                self.end_headers()
                self.wfile.write(b"injected")
                return
            try:
                with urllib.request.urlopen(upstream + self.path, timeout=PROXY_TIMEOUT_S) as answer:
                    body = answer.read()
            except OSError:
                self.send_response(502)  # as a real proxy answers when its upstream fails
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the runner gave up on it
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", failing
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_prometheus_frozen_killed_and_answering_5xx_each_fail_one_configuration(tmp_path: Path):
    state: dict[str, str] = {}

    def local_prometheus() -> str | None:
        return state.get("url")

    with _proxy(local_prometheus) as (proxy_url, failing):
        # a 10 s retry budget instead of the default 45 s: a frozen Prometheus fails its configuration sooner
        scenario = _scenario(tmp_path, [0.25, 0.26, 0.27, 0.28], prometheus={"url": proxy_url, "retry_seconds": 10})
        sweep = _start(tmp_path, scenario)
        deadline = time.monotonic() + 60
        while "url" not in state and time.monotonic() < deadline:
            records = list((Path(os.environ.get("GATEWAY_SIZER_CACHE", Path.home() / ".cache" / "gateway-sizer"))
                            / "state").glob(f"sweep-{sweep.pid}.json"))  # fmt: skip
            if records:
                state["url"] = json.loads(records[0].read_text())["urls"]["prometheus"]
            time.sleep(0.2)
        _wait_for_first_window(sweep, tmp_path, 0)
        _kill(sweep.pid, "prometheus", signal.SIGSTOP)  # frozen past the retry budget
        _wait_for_status(sweep, tmp_path, 0, "failed")
        _kill(sweep.pid, "prometheus", signal.SIGCONT)
        _wait_for_first_window(sweep, tmp_path, 1, timeout_s=300)
        _kill(sweep.pid, "prometheus")
        _wait_for_first_window(sweep, tmp_path, 2, timeout_s=300)
        failing.set()  # 5xx until the retry budget is spent
        _wait_for_status(sweep, tmp_path, 2, "failed")
        failing.clear()
        out, _err = _finish(sweep)
    summary = _summary(tmp_path)
    reasons = [c["reason"] or "" for c in summary["configs"]]
    assert [c["status"] for c in summary["configs"]][:3] == ["failed"] * 3, reasons
    assert reasons[0].startswith(f"Prometheus at {proxy_url} failed: ReadTimeout"), reasons
    assert reasons[1].startswith("prometheus exited with code -9"), reasons  # the supervisor noticed first
    assert reasons[2].startswith(f"Prometheus at {proxy_url} answered HTTP 503"), reasons
    assert summary["configs"][3]["status"] in ("saturated", "not-saturated"), reasons
    assert "restarted prometheus" in out
    assert sweep.returncode == 1 and summary["status"] == "partial"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_runner_killed_hard_leaves_no_load_and_testbed_down_clears_the_rest(tmp_path: Path):
    # over TLS: the run's private key is one of the things a hard kill leaves for `testbed down` to remove. One
    # configuration: the resume must finish the one the kill left running
    sweep = _start(tmp_path, _scenario(tmp_path, [0.25], profiles=["tls"]))
    _wait_for_first_window(sweep, tmp_path, 0)
    started = _all_pids(sweep.pid)
    locust = _pod_pids(sweep.pid, "locust-master") + _pod_pids(sweep.pid, "locust-worker-0")
    envoy = _pod_pids(sweep.pid, "envoy-local")
    sweep.kill()  # SIGKILL: no clean-up runs in the runner
    sweep.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while alive(locust + envoy) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(locust + envoy), "load left running after the runner was killed"
    assert _summary(tmp_path)["status"] == "running"  # nobody could write the end
    down = run_sizer("testbed", "down", timeout=120)
    assert down.returncode == 0 and f"sweep-{sweep.pid}" in down.stdout, down.stdout + down.stderr
    assert not alive(started) and not cgroup_tree(f"sweep-{sweep.pid}")
    run_dir = (tmp_path / "latest").resolve()
    assert not list(run_dir.rglob("*.key")) and not list(run_dir.rglob("*.crt"))
    resumed = run_sizer("sweep", "--resume", str(run_dir), "--free-ports", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _summary(tmp_path)["status"] == "complete"
    assert not list(run_dir.rglob("*.key"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_full_disk_is_one_line_and_keeps_what_was_saved(tmp_path: Path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    try:
        scenario = _scenario(tmp_path, [0.25, 0.26])
        sweep = subprocess.Popen(
            [*SIZER, "sweep", "--scenario", str(scenario), "--free-ports", "--results", str(disk)],
            cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_for_first_window(sweep, disk, 0)
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"\0" * max(0, free - 6000))  # room for a couple more saves at most
        _out, err = _finish(sweep)
        summary = json.loads((disk / "latest" / "summary.json").read_text())  # the last save is whole
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    assert sweep.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("gateway-sizer:")]
    assert any("No space left on device" in line for line in lines), err
    assert summary["configs"] and summary["configs"][0]["steps"]


def _remove_cpu_quota(sweep_pid: int, pod: str = "envoy-local") -> None:
    """What a kubelet with --cpu-cfs-quota=false does: the pod keeps its nominal limit, no quota binds."""
    driver = detect_driver()
    if driver.version == 1:
        (driver.mounts["cpu"] / ROOT_NAME / f"sweep-{sweep_pid}" / pod / "cpu.cfs_quota_us").write_text("-1")
    else:
        (driver.mounts["unified"] / ROOT_NAME / f"sweep-{sweep_pid}" / pod / "cpu.max").write_text("max 100000")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_envoy_without_its_cpu_quota_makes_the_configuration_invalid(tmp_path: Path):
    # A 20m limit: the first window runs under the quota, the next ones without it. No machine serves a request
    # through Envoy for less than 40 us of CPU (the fastest VM measured: 98 us at 2,200 RPS under 250m), so
    # 1,200 RPS need at least 48m, 2.4x the nominal limit, on any machine of this kind.
    scenario = _scenario(tmp_path, [0.02])
    data = yaml.safe_load(scenario.read_text())
    data["load"]["rps"] = [100, 400, 1200, 1600]
    scenario.write_text(yaml.safe_dump(data))
    sweep = _start(tmp_path, scenario)
    _wait_for_first_window(sweep, tmp_path, 0)
    _remove_cpu_quota(sweep.pid)
    _out, err = _finish(sweep)
    config = _summary(tmp_path)["configs"][0]
    assert config["status"] == "invalid", (config["status"], config["reason"])
    assert "the CPU limit is not enforced (kubelet --cpu-cfs-quota=false?)" in config["reason"], config["reason"]
    peak = max(s["cpu_utilization_mean"] for s in config["steps"])
    assert peak > 1.03, peak  # Envoy really ran past its nominal limit: the guard saw it, not a guess
    assert sweep.returncode == 0, err  # an invalid configuration is a finished one: the run is complete

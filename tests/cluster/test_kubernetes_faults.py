"""Faults injected for real into sweeps on the one-machine cluster: the API server paused for 30 s in a
measuring window, a rollout that can never complete, the runner stopped with SIGTERM (what Kubernetes sends a Job;
tests/local/test_sweep.py stops it with SIGINT, SIGTERM and SIGHUP) and killed with SIGKILL under load.

Each test prints the figures it measured (run pytest with -s to see them). Needs root.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from runner.heartbeat import HEARTBEAT_INTERVAL_S, HEARTBEAT_TIMEOUT_S
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.lease import lease_name
from runner.platforms.kubernetes.loadgen import TOKEN_SECRET
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector, run_hash
from runner.platforms.kubernetes.resize import live_pods
from runner.platforms.kubernetes.sizing_copy import fleet_name
from support.cluster import (
    ENVOY,
    NGINX,
    PROMETHEUS,
    daemon_pid,
    master_url,
    run_dir_of,
    scenario_file,
    sizer,
    stop_cleanly,
    wait_for_state,
)
from support.processes import run_sizer
from support.production import left_behind
from support.wait import until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
PAUSE_S = 30.0
ENVOY_SAMPLES = 'envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix="ingress_http"}[10s]'  # raw samples
ENVOY_SCRAPE_S = 2.0  # how often the cluster's Prometheus scrapes Envoy
QUIET_S = 10.0  # after the load stopped, Envoy serves nothing for this long


def _gateway(admin: Cluster) -> tuple[object, object, int]:
    return workloads.get_pod_resources(admin, ENVOY), workloads.get_args(admin, ENVOY), workloads.replicas(admin, NGINX)


def _assert_restored(admin: Cluster, before: tuple[object, object, int]) -> None:
    """Production's Envoy as it was (the run measured a sizing fleet beside it), nginx's replicas back, nothing of
    the run left: its fleet, Locust, Lease."""
    assert _gateway(admin) == before
    assert workloads.changed_by(admin, ENVOY) is None and workloads.changed_by(admin, NGINX) is None
    assert left_behind(admin) == []


def _fleet(run_dir: Path) -> workloads.Workload:
    return workloads.Workload("Deployment", "projectcontour", fleet_name(run_dir.name), "envoy")


def _finish(run, timeout_s: float) -> tuple[str, str]:
    try:
        return run.communicate(timeout=timeout_s)
    finally:
        stop_cleanly(run, signal.SIGINT)  # a clean stop: the gateway is restored


# The pause and rollout tests check how a run ends, not where the knee is: two fixed levels far below it keep
# each configuration short (the default adaptive search took 5-6 min). The pause lands in the second window: the
# runner reports its phase with every heartbeat (HEARTBEAT_INTERVAL_S, 2 s) and the test polls it every second, so
# the pause starts a few seconds into that 8 s window, and its 30 s outlast the window's end, its readout and the
# second configuration's apply.
SHORT_FIXED = {
    "load.rounds": 1,
    "load.search": "fixed",
    "load.rps": [100, 150],
    "load.step_seconds": 8,
    "load.warmup_seconds": 2,
    "load.settle_seconds": 1,
}


@pytest.mark.nightly  # 30 s of pause and the windows around it: a fault class the gate's API-server tests cover
@pytest.mark.timeout(2400)
def test_the_api_server_paused_30_s_in_a_measuring_window_is_ridden_out(cluster, tmp_path):
    kubeconfig, admin = cluster
    before = _gateway(admin)
    scenario = scenario_file(tmp_path, **{"envoy.cpu": [0.15, 0.3], **SHORT_FIXED})
    run = sizer("--scenario", str(scenario), kubeconfig=kubeconfig, results=tmp_path / "results")
    try:
        run_dir = run_dir_of(tmp_path / "results")
        state = wait_for_state(
            admin,
            run_dir.name,
            lambda s: s.get("position") == 1 and s.get("phase") == "measure" and len(s.get("windows") or []) >= 1,
            timeout_s=900,
            what="the second measuring window of the first configuration",
        )
        apiserver = daemon_pid("kube-apiserver")
        paused_at = time.time()
        os.kill(apiserver, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)  # the fault itself: the API server held stopped this long, not a wait for an event
        finally:
            os.kill(apiserver, signal.SIGCONT)
        resumed_at = time.time()
    finally:
        _, err = _finish(run, timeout_s=1800)
    summary = json.loads((run_dir / "summary.json").read_text())
    first, second = summary["configs"]
    hit = [s for s in first["steps"] if s["started_at"] < resumed_at and s["started_at"] + s["window_s"] > paused_at]
    print(
        f"\nAPI server paused {resumed_at - paused_at:.1f} s from window {len(state['windows']) + 1} of "
        f"{first['label']}; run {summary['status']} (exit {run.returncode}); configurations: "
        + "; ".join(f"{c['label']}: {c['status']} {c['reason'] or ''}" for c in summary["configs"])
        + "; windows over the pause: "
        + ", ".join(f"{s['window_s']:.0f} s at {s['rps']:.0f} RPS, CPU {s['cpu_utilization_mean']:.0%}" for s in hit)
    )
    # the outcome: every call rode the pause out (API, service proxy, Prometheus, the heartbeats' 60 s),
    # so no configuration failed and the window measured across the pause holds real figures
    assert run.returncode == 0 and summary["status"] == "complete", (summary["reason"], err[-2000:])
    # not-saturated, each: 100 and 150 RPS are far below the knee at 150m and 300m (a node 3.5x slower than the
    # development VM would still serve 150 RPS at 150m under 90%), and no guard fired: a window the pause spoilt
    # (load not delivered, counts that disagree) would make its configuration invalid
    for config in (first, second):
        assert config["status"] == "not-saturated", (config["status"], config["reason"])
        assert not any(s["guards"] for s in config["steps"]), [s["guards"] for s in config["steps"]]
    assert hit and all(s["rps"] > 0 and s["cpu_utilization_mean"] > 0 for s in hit)
    _assert_restored(admin, before)


# on_failure: stop (the second configuration never applied, the run failed) is the engine's logic, the same on every
# platform: tests/engine/test_sweep_engine.py checks it. Here the cluster's side: the rollout's failure, the reason
# and the restore after it.
@pytest.mark.nightly  # waits out a 30 s rollout timeout; the failed-configuration path is the local faults' too
@pytest.mark.timeout(2400)
def test_a_rollout_that_never_completes_fails_its_configuration_then_the_sweep_goes_on(cluster, tmp_path):
    kubeconfig, admin = cluster
    before = _gateway(admin)
    nodes = admin.core.list_node().items
    too_many = int(nodes[0].status.allocatable["cpu"]) + 2  # Guaranteed: requests = limits, no node fits it
    scenario = scenario_file(
        tmp_path,
        on_failure="continue",
        **{
            "envoy.cpu": [too_many, 0.15],
            "kubernetes.rollout_timeout_seconds": 30,
            **SHORT_FIXED,
            "load.rps": [100],  # the configuration after the failed one measured clean: each window says so alone
            "load.step_seconds": 6,
        },
    )
    started = time.monotonic()
    result = run_sizer(
        "sweep", "--scenario", str(scenario), "--results", str(tmp_path / "r"),
        timeout=1800, env={"KUBECONFIG": str(kubeconfig)},
    )  # fmt: skip
    took = time.monotonic() - started
    summary = json.loads((tmp_path / "r" / "latest" / "summary.json").read_text())
    first, *rest = summary["configs"]
    print(f"\nunschedulable Envoy: {first['reason']}\nrun {summary['status']} in {took:.0f} s")
    assert result.returncode == 1, result.stderr[-2000:]
    assert first["status"] == "failed"
    assert "does NOT fit" in result.stdout, result.stdout  # the preflight said so before the run
    assert re.search(
        r"rollout of Deployment projectcontour/gateway-sizer-envoy-\w+ not done after 30 s: pod gateway-sizer-envoy-"
        r"\S+ Pending, Unschedulable: .*Insufficient cpu.*; last event FailedScheduling",
        first["reason"],
    ), first["reason"]
    assert first["reason"].count("Insufficient cpu") == 1, first["reason"]  # the scheduler's message once
    last_line = result.stderr.strip().splitlines()[-1]
    (second,) = rest  # on_failure: continue, the second configuration measured after the failed one
    # not-saturated: 100 RPS far below the knee at 150m, its window clean (invalid would mean the failed rollout's
    # restore left something that spoilt the next measurement)
    assert second["status"] == "not-saturated" and second["steps"], (second["status"], second["reason"])
    assert not any(s["guards"] for s in second["steps"]), [s["guards"] for s in second["steps"]]
    assert summary["status"] == "partial"
    assert last_line.startswith("gateway-sizer: run partial: 1 of 2 configuration(s) did not finish"), last_line
    _assert_restored(admin, before)


def _envoy_requests() -> tuple[float, float]:
    """(when, requests): Envoy's request counter at Prometheus' latest scrape of it, summed over Envoy's pods (when:
    the oldest pod's latest sample)."""
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": ENVOY_SAMPLES})) as r:
        latest = [series["values"][-1] for series in json.loads(r.read())["data"]["result"]]
    assert latest, f"Prometheus has no sample of {ENVOY_SAMPLES}"
    return min(float(t) for t, _ in latest), sum(float(v) for _, v in latest)


@pytest.mark.nightly  # waits out the 60 s dead-man switch and times when the load stopped against it
@pytest.mark.timeout(1800)
def test_a_runner_killed_hard_leaves_no_load_and_restore_puts_everything_back(cluster, tmp_path):
    kubeconfig, admin = cluster
    before = _gateway(admin)
    scenario = scenario_file(tmp_path, **{"envoy.cpu": [0.15], "load.step_seconds": 30, "load.rounds": 1})
    run = sizer("--scenario", str(scenario), kubeconfig=kubeconfig, results=tmp_path / "results")
    run_dir: Path | None = None
    try:
        run_dir = run_dir_of(tmp_path / "results")
        wait_for_state(
            admin,
            run_dir.name,
            lambda s: s.get("phase") == "measure" and (s.get("users") or 0) > 0,
            timeout_s=900,
            what="a measuring window under load",
        )
        stats_url = master_url(admin, run_dir.name) + "/stats/requests"
        session = admin.session()
        loaded = session.get(stats_url, timeout=10).json()
        assert loaded["user_count"] > 0 and loaded["state"] in ("spawning", "running"), loaded
        run.send_signal(signal.SIGKILL)  # no cleanup, no last heartbeat, no stop
        killed_at = time.monotonic()
        run.communicate(timeout=30)
        until(
            lambda: session.get(stats_url, timeout=10).json(),
            HEARTBEAT_TIMEOUT_S + 60,
            "the master to stop the load after the runner fell silent",
            ready=lambda stats: stats["user_count"] == 0 and stats["state"] not in ("spawning", "running"),
            poll_s=1.0,  # the resolution of stopped_after
        )
        stopped_after, stopped_at = time.monotonic() - killed_at, time.time()
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    # Envoy's counter from a scrape two intervals after the load stopped (a request sent as it stopped is in), then
    # from one QUIET_S later: what Envoy served in between
    then = until(_envoy_requests, 60, "Envoy's requests scraped after the load stopped", poll_s=1.0,
                 ready=lambda sample: sample[0] >= stopped_at + 2 * ENVOY_SCRAPE_S)  # fmt: skip
    later = until(_envoy_requests, 60, f"Envoy's requests scraped {QUIET_S:g} s after that", poll_s=1.0,
                  ready=lambda sample: sample[0] >= then[0] + QUIET_S)  # fmt: skip
    grown = later[1] - then[1]
    print(
        f"\nrunner SIGKILLed at {loaded['user_count']} users: the master stopped the load after {stopped_after:.1f} s "
        f"(HEARTBEAT_TIMEOUT_S {HEARTBEAT_TIMEOUT_S:g}); Envoy then served {grown:.0f} requests in "
        f"{later[0] - then[0]:.0f} s"
    )
    # the dead-man switch did it: not before the runner could have been silent that long, not much after
    assert HEARTBEAT_TIMEOUT_S - HEARTBEAT_INTERVAL_S - 3 <= stopped_after <= HEARTBEAT_TIMEOUT_S + 5
    assert grown == 0
    # nothing else was cleaned up: the sizing fleet, the Locust objects and the Lease are there; production untouched
    assert workloads.get_resources(admin, _fleet(run_dir))["limits"]["cpu"] == "150m"
    assert _gateway(admin) == before and workloads.changed_by(admin, ENVOY) is None
    lease = client.CoordinationV1Api(admin.api).read_namespaced_lease(
        lease_name("projectcontour", "envoy"), "gateway-loadtest"
    )
    assert lease.metadata.annotations["gateway-sizer/run"] == run_dir.name

    started = time.monotonic()
    restored = run_sizer("restore", str(run_dir), timeout=900, env={"KUBECONFIG": str(kubeconfig)})
    print(f"restore took {time.monotonic() - started:.0f} s:\n{restored.stdout}")
    assert restored.returncode == 0, restored.stderr
    assert f"deleted Deployment projectcontour/{_fleet(run_dir).name}" in restored.stdout
    _assert_restored(admin, before)


# SIGTERM, what Kubernetes sends the runner's Job; Ctrl-C (SIGINT) takes the same path to the restore, and the
# local tests send it (tests/local/test_sweep.py)
@pytest.mark.timeout(1800)
def test_sigterm_stops_the_load_restores_the_gateway_and_removes_every_object_of_the_run(cluster, tmp_path):
    signum = signal.SIGTERM
    kubeconfig, admin = cluster
    before = _gateway(admin)
    scenario = scenario_file(tmp_path, **{"envoy.cpu": [0.15], "load.step_seconds": 30, "load.rounds": 1})
    run = sizer("--scenario", str(scenario), kubeconfig=kubeconfig, results=tmp_path / "results")
    try:
        run_dir = run_dir_of(tmp_path / "results")
        wait_for_state(admin, run_dir.name, lambda s: s.get("phase") == "measure" and (s.get("users") or 0) > 0,
                       timeout_s=900, what="a measuring window under load")  # fmt: skip
        assert workloads.replicas(admin, _fleet(run_dir)) == 1 and _gateway(admin) == before  # the fleet runs
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    name = signal.Signals(signum).name
    assert run.returncode == 128 + signum, stderr[-2000:]
    assert f"interrupted by {name}" in stderr and "Traceback" not in stderr, stderr[-2000:]
    _assert_restored(admin, before)  # production as it was; no fleet, no Locust Deployment, no Lease
    token = f"{TOKEN_SECRET}-{run_hash(run_dir.name)}"  # the master's command token: gone with the rest
    with pytest.raises(client.ApiException) as gone:
        admin.core.read_namespaced_secret(token, "gateway-loadtest")
    assert gone.value.status == 404
    # no load left running: every pod of the run is gone (the fleet's Envoy with the rest)
    selector = label_selector(MANAGED_BY)
    until(lambda: not admin.core.list_namespaced_pod("gateway-loadtest", label_selector=selector).items, 120,
          "the run's Locust pods to be gone")  # fmt: skip
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and name in summary["reason"]


def _envoy_cpu_cgroups(pods: set[str]) -> list[Path]:
    """The cgroup v1 `cpu` folders of the Envoy containers of the pods with these uids and of those pods (from
    /proc/<pid>/cgroup): the sizing fleet's, never production's."""
    folders: set[Path] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            groups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if not command or not command[0].endswith(b"envoy") or "kubepods" not in groups:
            continue
        for line in groups.splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(",") and "kubepods" in path and any(f"pod{uid}" in path for uid in pods):
                container = Path("/sys/fs/cgroup/cpu") / path.lstrip("/")
                folders |= {container, container.parent}
    return sorted(folders)


# A 50m limit on the cluster: the first window runs under the kubelet's quota, the second without it (the quota goes
# while the load ramps up to 2,400 RPS, a few seconds before that window starts). No machine serves a request through
# Envoy for less than 40 us of CPU (the fastest VM measured: 98 us at 2,200 RPS), so 2,400 RPS need at least 96m,
# twice the nominal limit, on any machine of this kind. One window past the limit is enough: the guard
# (runner.guards.cpu_limit_exceeded) judges each window on its own and makes the configuration invalid.
NO_QUOTA = {"envoy.cpu": [0.05], "load.rounds": 1, "load.search": "fixed", "load.rps": [100, 2400],
            "load.step_seconds": 6, "load.warmup_seconds": 2, "load.settle_seconds": 1}  # fmt: skip


@pytest.mark.nightly  # Envoy past its limit with no window to spare; the local faults' quota test is the gate's
@pytest.mark.timeout(1500)
def test_envoy_without_its_cfs_quota_on_the_node_makes_the_configuration_invalid(cluster, tmp_path):
    kubeconfig, admin = cluster
    before = _gateway(admin)
    run = sizer("--scenario", str(scenario_file(tmp_path, **NO_QUOTA)), kubeconfig=kubeconfig, results=tmp_path)
    run_dir = run_dir_of(tmp_path)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        configs = json.loads((run_dir / "summary.json").read_text())["configs"]
        if configs and configs[0]["steps"]:
            break
        assert run.poll() is None, run.communicate()
        time.sleep(0.5)
    folders = _envoy_cpu_cgroups({p.metadata.uid for p in live_pods(admin, _fleet(run_dir))})
    assert folders, "no Envoy container found in the kubelet's cgroups"
    for folder in folders:  # what a kubelet with --cpu-cfs-quota=false leaves: the limit in the spec, no quota
        (folder / "cpu.cfs_quota_us").write_text("-1")
    _out, err = _finish(run, 900)
    assert run.returncode == 0, err[-3000:]  # an invalid configuration is a finished one
    config = json.loads((run_dir / "summary.json").read_text())["configs"][0]
    assert config["status"] == "invalid", (config["status"], config["reason"])
    assert "the CPU limit is not enforced (kubelet --cpu-cfs-quota=false?)" in config["reason"], config["reason"]
    assert max(s["cpu_utilization_mean"] for s in config["steps"]) > 1.03  # Envoy ran past its nominal limit
    _assert_restored(admin, before)

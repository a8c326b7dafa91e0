"""The runner as a Job in both install modes on the real one-machine cluster (issue 31, items 2 and 3): a Gateway
API sweep run as a Job end to end, and a Job stopped mid-sweep every way a Job stops (its deadline, a SIGTERM, a
kill with --grace-period=0): each leaves the gateway exactly as it was (every field of the objects a live run
changes, and the resources Envoy's pods run with) and nothing of the sizing fleet it sized (issue 29), the first two
by themselves, the kill through `restore --from-cluster` from the records the Job published before each object it
created, taking the killed run's Lease over at once (its pod is gone). Needs root."""

from __future__ import annotations

import base64
import gzip
import json
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from kubernetes import client

from runner.model import FINISHED
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import COMPONENT_LABEL
from runner.platforms.kubernetes.originals import FILE_NAME
from runner.platforms.kubernetes.published import COMPONENT, RUN_ANNOTATION
from support.cluster import run
from support.processes import run_sizer
from support.production import left_behind
from support.runner_job import NAMESPACE, build_runner_image, install, job_done, job_logs, job_pods, left, snapshot
from support.wait import until

# make test-all: each builds and imports the runner image and runs Jobs (issue 28: the runner Job is test-all's)
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]
RELEASE = "sizer-modes"
RUNNER_ARG = "--scenario=/etc/gateway-sizer/scenario.yaml"  # in the Job's runner's command line (templates/runner.yaml)
# far below each limit's knee: these tests are about the Job, not where a knee is (each check holds window by window,
# and a stopped Job is stopped once its fleet is made: a second rate added a window per configuration and no check)
LEVELS = [100]
LOAD = {"client": "lean", "workers": 1, "rounds": 1, "search": "fixed", "rps": LEVELS, "step_seconds": 6,
        "warmup_seconds": 3, "settle_seconds": 1}  # fmt: skip
MODES: dict[str, dict[str, Any]] = {
    "httpproxy": {"envoy": {"cpu": ["200m", "300m"], "memory": "256Mi"}},
    "gateway": {
        "envoy": {"cpu": ["250m", "400m"], "memory": "256Mi"},
        "kubernetes": {"gateway": {"kind": "gateway", "namespace": "projectcontour", "name": "gateway-sizer"}},
    },
}


def _scenario(folder: Path, mode: str) -> Path:
    data = {"name": f"job-{mode}", "platform": "kubernetes", **MODES[mode], "load": LOAD,
            "prometheus": {"scrape_interval_seconds": 2}}  # fmt: skip
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _published(admin: Cluster) -> tuple[str, dict[str, Any]] | None:
    """(run id, {file: text}) of the run the Job published, or None before it has."""
    found: Any = admin.core.list_namespaced_config_map(NAMESPACE, label_selector=f"{COMPONENT_LABEL}={COMPONENT}")
    if not found.items:
        return None
    (item,) = found.items
    files = {key[:-3]: gzip.decompress(base64.b64decode(v)).decode() for key, v in (item.binary_data or {}).items()}
    return item.metadata.annotations[RUN_ANNOTATION], files


def _fleet_made(admin: Cluster) -> bool:
    """The Job has created its sizing fleet (the default target), recorded and published before it was made."""
    published = _published(admin)
    if published is None or FILE_NAME not in published[1]:
        return False
    return bool(json.loads(published[1][FILE_NAME])["created"]) and bool(left_behind(admin))


def _ran_at_least(admin: Cluster, seconds: float) -> int:
    """The Job's activeDeadlineSeconds that ends it now (its age plus one second), to patch in."""
    job: Any = client.BatchV1Api(admin.api).read_namespaced_job(f"{RELEASE}-runner", NAMESPACE)
    return int(time.time() - job.status.start_time.timestamp() + seconds)


def _sigkill_runner() -> None:
    """SIGKILL the Job's runner process, seen from the node (this machine): the kernel's kill, as the OOM killer's."""
    runners = [p for p in psutil.process_iter(["cmdline"]) if RUNNER_ARG in (p.info["cmdline"] or [])]
    assert len(runners) == 1, [p.info["cmdline"] for p in runners]
    runners[0].send_signal(signal.SIGKILL)
    runners[0].wait(timeout=30)


@pytest.mark.timeout(1800)
def test_a_gateway_api_sweep_runs_as_a_job_publishes_and_fetch_brings_it_home(cluster, tmp_path):
    kubeconfig, admin = cluster
    build_runner_image()
    before = snapshot(admin, "gateway")
    helm = install(kubeconfig, RELEASE, _scenario(tmp_path, "gateway"))
    try:
        done = until(lambda: job_done(admin, RELEASE), 1200, "the runner Job to finish", poll_s=1)
        logs = job_logs(admin, RELEASE)
        assert done == "Complete", logs[-3000:]
        assert "Records published as the run goes: ConfigMap gateway-loadtest/gateway-sizer-results-" in logs
        fetched = run_sizer("fetch", "--namespace", NAMESPACE, "--results", str(tmp_path / "results"),
                            env={"KUBECONFIG": str(kubeconfig)}, timeout=300)  # fmt: skip
        assert fetched.returncode == 0, fetched.stderr[-2000:]
        (run_dir,) = (tmp_path / "results").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "complete", summary["reason"]
        assert sorted(c["envoy"]["cpu"] for c in summary["configs"]) == [0.25, 0.4], summary["configs"]
        for config in summary["configs"]:
            assert config["status"] in FINISHED, config["reason"]
            windows = [(s["target_rps"], s["rps"], s["cpu_utilization_mean"]) for s in config["steps"]]
            assert [target for target, _, _ in windows] == LEVELS, windows
            assert all(rps > 0 and cpu > 0 for _, rps, cpu in windows), windows
        assert snapshot(admin, "gateway") == before  # put back by the Job itself
    finally:
        run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "5m"], timeout=400, check=False)
    until(lambda: not left(admin, RELEASE), 180, "the release's and the run's objects to be gone")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("mode", "stop"), [("gateway", "deadline"), ("httpproxy", "sigterm"),
                                            ("httpproxy", "kill"), ("gateway", "kill")])  # fmt: skip
def test_a_job_stopped_mid_sweep_leaves_the_gateway_as_it_was(cluster, tmp_path, mode, stop):
    kubeconfig, admin = cluster
    build_runner_image()
    before = snapshot(admin, mode)
    helm = install(kubeconfig, RELEASE, _scenario(tmp_path, mode))
    try:
        until(lambda: _fleet_made(admin), 600, "the Job's sizing fleet", poll_s=0.5)
        (pod,) = job_pods(admin, RELEASE)
        if stop == "deadline":  # the Job controller ends it as at its activeDeadlineSeconds
            client.BatchV1Api(admin.api).patch_namespaced_job(
                f"{RELEASE}-runner", NAMESPACE, {"spec": {"activeDeadlineSeconds": _ran_at_least(admin, 1)}}
            )
        elif stop == "sigterm":  # the Job's grace period to restore in
            admin.core.delete_namespaced_pod(pod.metadata.name, NAMESPACE)
        else:  # as an OOM kill or a lost node: SIGKILL, no moment to restore anything, then the pod deleted with
            # --grace-period=0 (alone, that still gives the runner a SIGTERM and 2 s: it restored in them here)
            _sigkill_runner()
            admin.core.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)
        until(lambda: job_done(admin, RELEASE), 900, "the Job to end", poll_s=1)
        until(lambda: not job_pods(admin, RELEASE), 900, "the Job's pod to be gone", poll_s=1)
        published = _published(admin)
        assert published is not None
        run_id, files = published
        if stop == "kill":  # nothing ran after the kill: what was published brings everything back
            assert left_behind(admin), "the killed Job's fleet"
            result = run_sizer("restore", run_id, "--from-cluster", "--namespace", NAMESPACE, "--results",
                               str(tmp_path / "home"), env={"KUBECONFIG": str(kubeconfig)}, timeout=900)  # fmt: skip
            assert result.returncode == 0, result.stderr[-3000:]
            assert "published the restored record back" in result.stdout, result.stdout
            # the killed Job's pod is gone, so nothing can renew its Lease: taken over at once, not after 60 s
            gone = f"at once: its pod {NAMESPACE}/{pod.metadata.name} is gone"
            assert f"took over run {run_id}'s Lease " in result.stdout and gone in result.stdout, result.stdout
            run_id, files = _published(admin) or ("", {})
        else:  # the runner restored the gateway itself, then published how the sweep ended
            summary = json.loads(files["summary.json"])
            assert summary["status"] == "interrupted", summary["reason"]  # SIGTERM, from the kubelet either way
        record = json.loads(files[FILE_NAME])
        assert not record["created"] and not any(p["changed"] or p["marked"] for p in record["parameters"])
        assert not any(o["resources_changed"] or o["args_changed"] or o["marked"] for o in record["originals"])
        after = snapshot(admin, mode)
        differing = [key for key in before if before[key] != after[key]]
        assert not differing, {key: (before[key], after[key]) for key in differing}
        # nothing of the run's fleet or load; the Job's published records stay until the release is uninstalled
        assert [thing for thing in left_behind(admin) if "gateway-sizer-results-" not in thing] == []
    finally:
        run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "5m"], timeout=400, check=False)
    until(lambda: not left(admin, RELEASE), 180, "the release's and the run's objects to be gone")

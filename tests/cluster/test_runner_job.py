"""The runner as a Job on the real one-machine cluster, as a user runs it (issue 23, part 2): the runner image
built from this checkout and imported into containerd, `helm install` of charts/gateway-loadtest with only the
runner on, the Job sweeps from inside the cluster as the ServiceAccount of k8s/manifests/rbac and publishes its
records, `gateway-sizer fetch` brings the report home, and `helm uninstall` leaves nothing. Needs root."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from kubernetes import client

from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector
from support.cluster import ENVOY, run
from support.processes import run_sizer
from support.wait import until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
RELEASE = "sizer-job"
NAMESPACE = "gateway-loadtest"
CONTAINERD_SOCK = "/run/gateway-sizer/containerd/containerd.sock"
# The test is about helm, the Job, publishing, fetch and uninstall, not where a knee is (the search is the same code
# wherever the runner runs): one fixed rate far below a 200m Envoy's knee (each check holds window by window; a second
# rate added a window and no check).
LEVELS = [100]
SCENARIO = f"""\
name: in-cluster-test
platform: kubernetes
envoy:
  cpu: [200m]
  memory: 256Mi
load:
  client: lean
  workers: 1
  rounds: 1
  search: fixed
  rps: {LEVELS}
  step_seconds: 6
  warmup_seconds: 3
  settle_seconds: 1
prometheus:
  scrape_interval_seconds: 2
"""


def _helm() -> str:
    out = run([str(PROJECT_ROOT / "k8s" / "cluster" / "build.sh"), "--print-path", "helm"], timeout=900).stdout
    return out.split()[-1]


def _job_done(admin: Cluster) -> str | None:
    job = client.BatchV1Api(admin.api).read_namespaced_job(f"{RELEASE}-runner", NAMESPACE)
    for condition in job.status.conditions or []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return str(condition.type)
    return None


def _left(admin: Cluster) -> list[str]:
    """Anything of the release or of a run still in the namespace."""
    left = [f"Job {j.metadata.name}" for j in client.BatchV1Api(admin.api).list_namespaced_job(NAMESPACE).items]
    left += [f"Pod {p.metadata.name}" for p in admin.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"app={RELEASE}-runner").items]  # fmt: skip
    left += [f"ConfigMap {c.metadata.name}" for c in admin.core.list_namespaced_config_map(NAMESPACE).items
             if c.metadata.name.startswith((RELEASE, "gateway-sizer-results"))]  # fmt: skip
    left += [f"Deployment {d.metadata.name}" for d in admin.apps.list_namespaced_deployment(
        NAMESPACE, label_selector=label_selector(MANAGED_BY)).items]  # fmt: skip
    return left


@pytest.mark.nightly  # builds and imports the runner image from this checkout (only this test needs it)
@pytest.mark.timeout(2400)
def test_helm_installs_the_runner_as_a_job_whose_report_fetch_brings_home_and_uninstall_leaves_nothing(
    cluster, tmp_path
):
    kubeconfig, admin = cluster
    # the runner image of this checkout (cluster-up builds no runner image: built and imported here, when it changed)
    run([sys.executable, str(PROJECT_ROOT / "k8s" / "images" / "build_images.py"), "--import", "--address",
         CONTAINERD_SOCK, "runner"], timeout=1200)  # fmt: skip
    before = workloads.get_pod_resources(admin, ENVOY)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    helm = [_helm(), "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE]
    install = [*helm, "install", RELEASE, str(PROJECT_ROOT / "charts" / "gateway-loadtest"),
               "--set", "nginx.enabled=false", "--set", "httpProxy.enabled=false", "--set", "runner.enabled=true",
               "--set", "runner.image.pullPolicy=Never", "--set-file", f"runner.scenario={scenario}"]  # fmt: skip
    try:
        run(install, timeout=120)
        done = until(lambda: _job_done(admin), 1500, "the runner Job to finish", poll_s=1)
        logs = "".join(
            admin.core.read_namespaced_pod_log(p.metadata.name, NAMESPACE)
            for p in admin.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={RELEASE}-runner").items
        )
        assert done == "Complete", logs[-3000:]
        assert "Results published: ConfigMap gateway-loadtest/gateway-sizer-results-" in logs, logs[-3000:]

        fetched = run_sizer("fetch", "--namespace", NAMESPACE, "--results", str(tmp_path / "results"),
                            env={"KUBECONFIG": str(kubeconfig)}, timeout=300)  # fmt: skip
        assert fetched.returncode == 0, fetched.stderr[-2000:]
        (run_dir,) = (tmp_path / "results").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["platform"] == "kubernetes", summary["reason"]
        (config,) = summary["configs"]
        windows = [(s["target_rps"], s["rps"], s["cpu_utilization_mean"]) for s in config["steps"]]
        # not-saturated: both rates far below a 200m Envoy's knee; every window clean and served in full (the Job's
        # Locust reached the gateway from inside the cluster), with Envoy's CPU read through the cluster's Prometheus
        assert config["status"] == "not-saturated", (config["status"], config["reason"], windows)
        assert [target for target, _, _ in windows] == LEVELS, windows  # every level measured in the cluster
        assert not any(s["guards"] for s in config["steps"]), [s["guards"] for s in config["steps"]]
        assert all(rps >= 0.9 * target and 0 < cpu < 0.9 for target, rps, cpu in windows), windows
        html = (run_dir / "report.html").read_text()
        for _, rps, _ in windows:  # the report rendered here from the Job's records: each window's RPS, in bold
            assert f'<td class="n strong">{rps:,.0f}</td>' in html, rps
        assert json.loads((run_dir / "kubernetes-originals.json").read_text())["originals"]  # what restore needs
        assert f"fetched run {summary['run_id']}" in fetched.stdout
    finally:
        run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "5m"], timeout=400, check=False)
    until(lambda: not _left(admin), 180, "the release's and the run's objects to be gone")
    assert workloads.get_pod_resources(admin, ENVOY) == before  # the run put the gateway back itself
    assert workloads.changed_by(admin, ENVOY) is None


def test_fetch_without_a_published_run_says_so_in_one_line(cluster, tmp_path: Path):
    kubeconfig, _ = cluster
    result = run_sizer("fetch", "--namespace", "monitoring", "--results", str(tmp_path),
                       env={"KUBECONFIG": str(kubeconfig)}, timeout=120)  # fmt: skip
    assert result.returncode != 0
    assert "no run published in namespace monitoring" in result.stderr and "Traceback" not in result.stderr

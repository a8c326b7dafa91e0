"""The Contour branch of a Kubernetes sweep on the real one-machine cluster: each configuration gives
Contour's Deployment the scenario's resources (Guaranteed: limits = requests), Envoy is measured under load
with them, and the end of the run puts Contour's original resources back. Contour is production's, so this is a
live run (kubernetes.target: live and --live): the cluster tier's one run of the live target on the classic
install (Envoy patched, resized in place, its originals back)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from runner.platforms.kubernetes import workloads
from support.cluster import scenario_file, sizer
from support.processes import run_sizer
from support.wait import until

# make test-all: Contour's resources per configuration, a branch of the same patch-and-restore the gate's sweeps run
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]
CONTOUR = workloads.Workload("Deployment", "projectcontour", "contour", "contour")
SIZES = [{"cpu": "200m", "memory": "256Mi"}, {"cpu": "300m", "memory": "320Mi"}]


def _preflight(scenario: Path, kubeconfig: Path, folder: Path) -> subprocess.CompletedProcess:
    """The live run's preflight (`sweep --live --dry-run`): changes nothing."""
    args = ("sweep", "--live", "--scenario", str(scenario), "--dry-run", "--results", str(folder / "dry-run"))
    return run_sizer(*args, timeout=120, env={"KUBECONFIG": str(kubeconfig)})


@pytest.mark.timeout(1500)
def test_contour_gets_each_configurations_resources_and_its_originals_back(cluster, tmp_path):
    kubeconfig, admin = cluster
    before = workloads.get_pod_resources(admin, CONTOUR)
    scenario = scenario_file(
        tmp_path,
        **{
            "envoy.cpu": [0.3],
            "kubernetes.target": "live",
            "contour.resources": SIZES,
            "load.search": "fixed",
            "load.rounds": 1,
            "load.rps": [150],  # what Contour gets is checked, not a knee: one window at any served rate will do
            "load.step_seconds": 4,
            "load.warmup_seconds": 2,
            "load.settle_seconds": 1,
        },
    )
    seen: list[tuple[str, str]] = []
    stop = threading.Event()

    def watch() -> None:  # what Contour's pod template says while the sweep runs
        while not stop.is_set():
            limits = (workloads.get_pod_resources(admin, CONTOUR).get("contour") or {}).get("limits") or {}
            pair = (str(limits.get("cpu")), str(limits.get("memory")))
            if not seen or seen[-1] != pair:
                seen.append(pair)
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    envoy = workloads.Workload("DaemonSet", "projectcontour", "envoy", "envoy")
    envoy_before = workloads.get_pod_resources(admin, envoy), workloads.get_args(admin, envoy)
    # a live run refuses a gateway that served traffic over the last 10 s (preflight), as a test before this one may
    # have left it (test_cluster_benches' production load): the preflight itself says when it is idle
    until(lambda: _preflight(scenario, kubeconfig, tmp_path).returncode == 0, 120, "the production gateway idle")
    sweep = sizer("--live", "--scenario", str(scenario), kubeconfig=kubeconfig, results=tmp_path)
    try:
        _out, err = sweep.communicate(timeout=1200)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert sweep.returncode == 0, err[-3000:]
    assert ("200m", "256Mi") in seen and ("300m", "320Mi") in seen, seen
    assert seen.index(("200m", "256Mi")) < seen.index(("300m", "320Mi")), seen
    assert workloads.get_pod_resources(admin, CONTOUR) == before  # the originals, exactly
    assert (workloads.get_pod_resources(admin, envoy), workloads.get_args(admin, envoy)) == envoy_before
    summary = json.loads((tmp_path / "latest" / "summary.json").read_text())
    contours = [(c["contour"]["cpu"], c["contour"]["memory"]) for c in summary["configs"]]
    assert contours == [(0.2, "256Mi"), (0.3, "320Mi")], contours
    assert all(len(c["steps"]) == 1 for c in summary["configs"])

"""The CLI against a real API server: clear one-line errors, nothing left patched, restore after a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from k8s_objects import create, workload
from sizer_testing import PROJECT_ROOT, run_sizer

from runner.platforms.kubernetes import workloads as wl
from runner.platforms.local.processes import free_port

pytestmark = pytest.mark.kubernetes
ORIGINAL = {"requests": {"cpu": "100m"}}


def _scenario(tmp_path: Path, namespace: str, kubeconfig: Path, **extra: object) -> Path:
    data = {
        "name": "k8s-test",
        "platform": "kubernetes",
        "envoy": {"cpu": [0.5], "workload": {"namespace": namespace, "name": "envoy", "container": "envoy"}},
        "backend": {"workload": {"namespace": namespace, "name": "nginx", "container": "nginx"}},
        "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": namespace, "rollout_timeout_seconds": 5},
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _one_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.stdout[-1500:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_an_unreachable_cluster_is_one_line(tmp_path):
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            }
        )
    )
    result = run_sizer(
        "sweep", "--platform", "kubernetes", "--results", str(tmp_path / "r"), env={"KUBECONFIG": str(dead)}
    )
    _one_line(result, "Kubernetes API unreachable", "KUBECONFIG")


def test_a_gateway_that_does_not_exist_is_one_line(apiserver, admin, namespace, tmp_path):
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig)
    _one_line(
        run_sizer("sweep", "--scenario", str(scenario), "--results", str(tmp_path / "r")),
        f"no DaemonSet or Deployment {namespace}/envoy",
    )


@pytest.mark.parametrize("prometheus", ["service-proxy", "url"])
def test_unreachable_prometheus_is_one_line_and_leaves_nothing_patched(
    apiserver, admin, namespace, tmp_path, prometheus
):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": ORIGINAL}))
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    extra = {"prometheus": {"url": f"http://127.0.0.1:{free_port()}"}} if prometheus == "url" else {}
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig, **extra)
    _one_line(run_sizer("sweep", "--scenario", str(scenario), "--results", str(tmp_path / "r")), "Prometheus")
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert wl.replicas(admin, wl.Workload("Deployment", namespace, "nginx", "nginx")) == 2
    assert admin.apps.list_namespaced_deployment(namespace).items[0].metadata.name == "nginx"  # no Locust objects
    summary = json.loads((tmp_path / "r" / "latest" / "summary.json").read_text())
    assert summary["status"] == "failed" and "Prometheus" in summary["reason"]


CRASHING_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from runner.platforms.kubernetes import workloads as wl
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.loadgen import create_locust
    from runner.platforms.kubernetes.originals import FILE_NAME, ClusterChanges, Original
    from runner.results import RunStore
    from runner.scenario import load_scenario
    sys.path.insert(0, "tests/kubernetes")
    from test_locust_objects import _spec
    scenario = load_scenario(sys.argv[1])
    store = RunStore.create(scenario, Path(sys.argv[2]))
    cluster = connect(scenario.kubernetes.kubeconfig)
    changes = ClusterChanges(store.run_dir / FILE_NAME)
    envoy = wl.find(cluster, scenario.envoy.workload, "envoy")
    nginx = wl.find(cluster, scenario.backend.workload, "backend")
    recorded = changes.remember(Original(envoy, wl.get_pod_resources(cluster, envoy), args=wl.get_args(cluster, envoy)))
    recorded.resources_changed = recorded.args_changed = True
    changes.remember(Original(nginx, wl.get_pod_resources(cluster, nginx), replicas=2)).replicas_changed = True
    changes.save()
    wl.set_pod_resources(cluster, envoy, {"envoy": wl.resources_for(0.15, 2**28)}, {"envoy": ["--concurrency", "1"]})
    wl.scale(cluster, nginx, 4)
    create_locust(cluster, _spec(scenario.kubernetes.namespace), changes)
    print("patched", flush=True)
    time.sleep(600)
""")


def test_restore_undoes_a_run_that_was_killed_hard(apiserver, admin, namespace, tmp_path):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": ORIGINAL}))
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig)
    results = tmp_path / "results"
    run = subprocess.Popen(
        [sys.executable, "-c", CRASHING_RUN, str(scenario), str(results)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout.readline().strip() == "patched"
    run.send_signal(signal.SIGKILL)  # no cleanup can run
    run.wait()
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert wl.get_resources(admin, envoy)["limits"]["cpu"] == "150m"
    assert wl.get_args(admin, envoy) == ["--concurrency", "1"]
    assert len(admin.apps.list_namespaced_deployment(namespace).items) == 3

    result = run_sizer("restore", str((results / "latest").resolve()), "--no-wait")
    assert result.returncode == 0, result.stderr
    assert f"restored resources and args of DaemonSet {namespace}/envoy" in result.stdout
    assert f"restored 2 replicas of Deployment {namespace}/nginx" in result.stdout
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert wl.get_args(admin, envoy) is None
    assert [d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items] == ["nginx"]
    assert wl.replicas(admin, wl.Workload("Deployment", namespace, "nginx", "nginx")) == 2
    again = run_sizer("restore", str((results / "latest").resolve()))
    assert again.returncode == 0 and "nothing to restore" in again.stdout

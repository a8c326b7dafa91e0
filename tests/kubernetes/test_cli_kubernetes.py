"""The CLI against a real API server: clear one-line errors, nothing left patched, restore after a crash,
a resumed run that keeps its first originals, a gateway with a killed run's changes refused."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from runner.errors import PlatformError
from runner.paths import PROJECT_ROOT
from runner.plan import plan_sweep
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.lease import lease_name
from runner.platforms.kubernetes.loadgen import create_locust
from runner.platforms.kubernetes.originals import FILE_NAME
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.local.processes import free_port
from runner.scenario import load_scenario
from support.k8s import ORIGINAL, create, gateway, locust_spec, scenario_file, workload
from support.processes import one_line, run_sizer
from support.project import TESTS, child_env
from support.synthetic_prometheus import envoy_pod, synthetic_prometheus
from support.wait import until

pytestmark = pytest.mark.kubernetes
KILLED_LEASE_S = 20  # CRASHING_RUN's Lease: outlasts the kill and a restore's start on a busy machine (8 s did not)


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
    one_line(result, "Kubernetes API unreachable", "KUBECONFIG")


def test_a_gateway_that_does_not_exist_is_one_line(apiserver, admin, namespace, tmp_path):
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig)
    one_line(
        run_sizer("sweep", "--live", "--scenario", str(scenario), "--results", str(tmp_path / "r")),
        f"no DaemonSet or Deployment {namespace}/envoy",
    )


@pytest.mark.parametrize("prometheus", ["service-proxy", "url"])
def test_unreachable_prometheus_is_one_line_and_leaves_nothing_patched(
    apiserver, admin, namespace, tmp_path, prometheus
):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": ORIGINAL}))
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    url = {"url": f"http://127.0.0.1:{free_port()}"} if prometheus == "url" else {}
    # a 5 s retry budget: the default 45 s would only make the refused connection take longer to report
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig, prometheus={"retry_seconds": 5, **url})
    line = one_line(
        run_sizer("sweep", "--live", "--scenario", str(scenario), "--results", str(tmp_path / "r")), "Prometheus"
    )
    if prometheus == "service-proxy":  # no Service monitoring/prometheus here: name the cluster's own
        assert "prometheus.service" in line and "<release>-kube-prometheus-prometheus" in line, line
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert wl.replicas(admin, wl.Workload("Deployment", namespace, "nginx", "nginx")) == 2
    assert admin.apps.list_namespaced_deployment(namespace).items[0].metadata.name == "nginx"  # no Locust objects
    assert not (tmp_path / "r").exists()  # refused by the preflight, before a run directory exists


# A run killed hard after its changes, through the platform's own steps: the Lease taken, the originals
# recorded, the workloads annotated and patched (Envoy 150m, --concurrency 1; nginx 2 -> 4 replicas), the
# Locust objects created. No kubelet runs here, so no rollout is waited for. Its Lease lasts KILLED_LEASE_S.
CRASHING_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from runner.plan import plan_sweep
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.loadgen import create_locust
    from runner.platforms.kubernetes.platform import KubernetesPlatform
    from runner.results import RunStore
    from runner.scenario import load_scenario
    from support.k8s import locust_spec
    scenario = load_scenario(sys.argv[1])
    store = RunStore.create(scenario, Path(sys.argv[2]))
    platform = KubernetesPlatform(scenario, store.run_dir, live=True)
    platform.lease_duration_s = LEASE_S
    platform.cluster = connect(scenario.kubernetes.kubeconfig)
    platform.claim(platform.cluster)
    config = plan_sweep(scenario).configurations[0]
    platform.patch(config)
    platform.fleet.size(platform.cluster, config, fresh=False)
    ns = scenario.kubernetes.namespace
    create_locust(platform.cluster, locust_spec(ns, run_id=store.run_dir.name, gateway=f"{ns}/envoy"), platform.changes)
    print(store.run_dir, flush=True)
    time.sleep(600)
""").replace("LEASE_S", str(KILLED_LEASE_S))


def _killed_run(admin, namespace: str, scenario: Path, results: Path) -> tuple[Path, int]:
    """Start CRASHING_RUN, SIGKILL it once it has patched, check what it left; returns its run directory and the
    pid it ran as."""
    run = subprocess.Popen(
        [sys.executable, "-c", CRASHING_RUN, str(scenario), str(results)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(TESTS),  # it imports support.k8s
    )
    run_dir = Path(run.stdout.readline().strip())
    run.send_signal(signal.SIGKILL)  # no cleanup can run
    run.wait()
    assert run_dir.is_dir(), run_dir
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert wl.get_resources(admin, envoy)["limits"]["cpu"] == "150m"
    assert wl.get_args(admin, envoy) == ["--concurrency", "1"]
    assert wl.changed_by(admin, envoy) == run_dir.name
    assert wl.changed_by(admin, wl.Workload("Deployment", namespace, "nginx", "nginx")) == run_dir.name
    assert len(admin.apps.list_namespaced_deployment(namespace).items) == 3
    return run_dir, run.pid


def _lease_expired(admin, namespace: str) -> bool:
    """The gateway's Lease not renewed for its duration, by the API server's record and this machine's clock."""
    lease = client.CoordinationV1Api(admin.api).read_namespaced_lease(lease_name(namespace, "envoy"), namespace)
    renewed, duration = lease.spec.renew_time, lease.spec.lease_duration_seconds
    return (datetime.now(UTC) - renewed).total_seconds() > duration


def _assert_restored(admin, namespace: str) -> None:
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    nginx = wl.Workload("Deployment", namespace, "nginx", "nginx")
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert wl.get_args(admin, envoy) is None
    assert wl.replicas(admin, nginx) == 2
    assert wl.changed_by(admin, envoy) is None and wl.changed_by(admin, nginx) is None
    assert [d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items] == ["nginx"]
    with pytest.raises(ApiException) as gone:
        client.CoordinationV1Api(admin.api).read_namespaced_lease(lease_name(namespace, "envoy"), namespace)
    assert gone.value.status == 404


def test_restore_undoes_a_run_that_was_killed_hard(apiserver, admin, namespace, tmp_path):
    gateway(admin, namespace)
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig, envoy_cpu=0.15, replicas=4, concurrency="auto")
    run_dir, pid = _killed_run(admin, namespace, scenario, tmp_path / "results")

    result = run_sizer("restore", str(run_dir), "--no-wait")
    assert result.returncode == 0, result.stderr
    # killed on this machine: its process is gone, so its Lease is taken over at once, not after KILLED_LEASE_S
    lease = f"Lease {namespace}/{lease_name(namespace, 'envoy')}"
    assert f"took over run {run_dir.name}'s {lease} at once: its process {pid} on this machine has ended" in (
        result.stdout
    ), result.stdout
    assert f"restored resources and args of DaemonSet {namespace}/envoy" in result.stdout
    assert f"restored 2 replicas of Deployment {namespace}/nginx" in result.stdout
    _assert_restored(admin, namespace)
    again = run_sizer("restore", str(run_dir))
    assert again.returncode == 0 and "nothing to restore" in again.stdout


def test_resume_after_a_hard_kill_keeps_the_originals_of_the_first_attempt(apiserver, admin, namespace, tmp_path):
    """H3: the resumed attempt finds the gateway patched; it must not record that as the originals."""
    gateway(admin, namespace)
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig, envoy_cpu=0.15, replicas=4, concurrency="auto")
    run_dir, pid = _killed_run(admin, namespace, scenario, tmp_path / "results")
    recorded = json.loads((run_dir / FILE_NAME).read_text())["originals"]
    assert recorded[0]["resources"] == {"envoy": ORIGINAL} and recorded[0]["args"] is None

    # the resumed attempt passes its preflight (the gateway's changes are its own run's), takes the killed attempt's
    # Lease over at once (its process on this machine has ended), accepts the changes as its own, then fails on its
    # Locust master (no kubelet runs here: its rollout times out) and on its way out restores the originals
    scenario_data = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    with synthetic_prometheus(tmp_path, envoy_pod(namespace, "envoy-none", rps=0.0, cores=0.0)) as url:
        scenario_data["prometheus"]["url"] = url
        (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario_data))
        result = run_sizer("sweep", "--live", "--resume", str(run_dir), timeout=120)
    assert result.returncode == 1, result.stderr  # a run that started, and failed
    taken = f"took over run {run_dir.name}'s Lease {namespace}/{lease_name(namespace, 'envoy')} at once"
    assert f"gateway-sizer: {taken}: its process {pid} on this machine has ended" in result.stderr, result.stderr
    assert "gateway-sizer: rollout of Deployment" in result.stderr and "locust-master-" in result.stderr
    after = json.loads((run_dir / FILE_NAME).read_text())
    assert [o["resources"] for o in after["originals"]] == [o["resources"] for o in recorded]
    assert [o["args"] for o in after["originals"]] == [None, None]
    assert [o["replicas"] for o in after["originals"]] == [None, 2]
    _assert_restored(admin, namespace)


def test_a_new_run_refuses_a_gateway_that_carries_a_killed_runs_changes(apiserver, admin, namespace, tmp_path):
    gateway(admin, namespace)
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig, envoy_cpu=0.15, replicas=4, concurrency="auto")
    run_dir, _ = _killed_run(admin, namespace, scenario, tmp_path / "results")
    until(lambda: _lease_expired(admin, namespace), KILLED_LEASE_S + 10, "the killed run's Lease to expire")
    # once its Lease has expired, its annotation still protects the gateway
    result = run_sizer("sweep", "--live", "--scenario", str(scenario), "--results", str(tmp_path / "new"))
    one_line(
        result,
        f"DaemonSet {namespace}/envoy still carries changes of run {run_dir.name} that were never restored",
        f"run `gateway-sizer restore {run_dir.name}` first",
    )
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert wl.get_resources(admin, envoy)["limits"]["cpu"] == "150m"  # untouched
    assert run_sizer("restore", str(run_dir), "--no-wait").returncode == 0
    _assert_restored(admin, namespace)


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs, to be filled."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root: run the kubernetes tests as root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def _fill(folder: Path) -> None:
    descriptor = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def test_undo_goes_on_past_a_full_disk_and_reports_every_failure_together(apiserver, admin, namespace, small_disk):
    gateway(admin, namespace)
    scenario = load_scenario(
        str(scenario_file(small_disk, namespace, apiserver.kubeconfig, envoy_cpu=0.15, replicas=4, concurrency="auto"))
    )
    run_dir = small_disk / "run"
    run_dir.mkdir()
    platform = KubernetesPlatform(scenario, run_dir, live=True)
    platform.cluster = admin
    platform.claim(admin)
    config = plan_sweep(scenario).configurations[0]
    platform.patch(config)
    platform.fleet.size(admin, config, fresh=False)
    create_locust(admin, locust_spec(namespace, run_id=run_dir.name, gateway=f"{namespace}/envoy"), platform.changes)
    _fill(small_disk)  # from here no save of kubernetes-originals.json can succeed
    with pytest.raises(PlatformError) as incomplete:
        platform.stop()
    message = incomplete.value.one_line()
    assert message.startswith("restore incomplete: cannot save ") and message.count("No space left on device") == 1
    _assert_restored(admin, namespace)  # every original is back and every object is gone all the same

"""A Job's records published as the run goes (runner/platforms/kubernetes/publishing.py), against a real API
server: a run killed hard after its changes, its run directory gone with it (a Job's emptyDir), is put back by
`restore --from-cluster` from what it published before each change. (tests/cluster/test_runner_job_kill.py kills
the real Job on the one-machine cluster, in both install modes.)"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.originals import FILE_NAME
from runner.platforms.kubernetes.published import configmap_name
from support.k8s import ORIGINAL, gateway, scenario_file
from support.processes import run_sizer
from support.project import TESTS, child_env

pytestmark = pytest.mark.kubernetes
KILLED_LEASE_S = 20  # the killed run's Lease: restore waits it out

# A Job's runner up to its first changes, through the platform's own steps with its records published as it goes
# (as `sweep --publish` does), then killed: the Lease taken, the originals recorded, Envoy and nginx patched (a live
# run's: the production gateway's own Envoy, as `sweep --live` changes it).
PUBLISHING_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from runner.plan import plan_sweep
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.platform import KubernetesPlatform
    from runner.platforms.kubernetes.publishing import publish_as_it_goes
    from runner.results import RunStore
    from runner.scenario import load_scenario
    scenario = load_scenario(sys.argv[1])
    store = RunStore.create(scenario, Path(sys.argv[2]))
    platform = KubernetesPlatform(scenario, store.run_dir, live=True)
    publish_as_it_goes(platform, scenario, store.run_dir)
    platform.lease_duration_s = LEASE_S
    platform.cluster = connect(scenario.kubernetes.kubeconfig)
    platform.claim(platform.cluster)
    config = plan_sweep(scenario).configurations[0]
    platform.patch(config)
    platform.fleet.size(platform.cluster, config, fresh=False)
    print(store.run_dir, flush=True)
    time.sleep(600)
""").replace("LEASE_S", str(KILLED_LEASE_S))


def _published(admin, namespace: str, run_id: str) -> dict:
    found = admin.core.read_namespaced_config_map(configmap_name(run_id), namespace)
    return json.loads(gzip.decompress(base64.b64decode(found.binary_data[f"{FILE_NAME}.gz"])))


def test_a_run_killed_with_its_run_directory_is_restored_from_what_it_published(apiserver, admin, namespace,
                                                                                tmp_path):  # fmt: skip
    gateway(admin, namespace)
    scenario = scenario_file(tmp_path, namespace, apiserver.kubeconfig, envoy_cpu=0.15, replicas=4, concurrency="auto")
    run = subprocess.Popen([sys.executable, "-c", PUBLISHING_RUN, str(scenario), str(tmp_path / "pod")],
                           cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True, env=child_env(TESTS))  # fmt: skip
    run_dir = Path(run.stdout.readline().strip())
    run.send_signal(signal.SIGKILL)
    run.wait()
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    nginx = wl.Workload("Deployment", namespace, "nginx", "nginx")
    assert wl.get_resources(admin, envoy)["limits"]["cpu"] == "150m" and wl.replicas(admin, nginx) == 4
    shutil.rmtree(run_dir)  # the Job's emptyDir, gone with its pod

    # what was published records every change the run made, with what was there before
    published = _published(admin, namespace, run_dir.name)
    (envoy_record, nginx_record) = published["originals"]
    assert envoy_record["resources"] == {"envoy": ORIGINAL} and envoy_record["resources_changed"]
    assert nginx_record["replicas"] == 2 and nginx_record["replicas_changed"]

    result = run_sizer("restore", run_dir.name, "--from-cluster", "--namespace", namespace, "--results",
                       str(tmp_path / "home"), "--kubeconfig", str(apiserver.kubeconfig), "--no-wait")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"restored resources and args of DaemonSet {namespace}/envoy" in result.stdout
    assert f"restored 2 replicas of Deployment {namespace}/nginx" in result.stdout
    assert wl.get_resources(admin, envoy) == ORIGINAL and wl.get_args(admin, envoy) is None
    assert wl.replicas(admin, nginx) == 2
    assert wl.changed_by(admin, envoy) is None and wl.changed_by(admin, nginx) is None
    # and the cluster's copy no longer asks for a restore
    after = _published(admin, namespace, run_dir.name)
    assert not any(o["resources_changed"] or o["replicas_changed"] or o["marked"] for o in after["originals"])
    again = run_sizer("restore", run_dir.name, "--from-cluster", "--namespace", namespace, "--results",
                      str(tmp_path / "home"), "--kubeconfig", str(apiserver.kubeconfig))  # fmt: skip
    assert again.returncode == 0 and "nothing to restore" in again.stdout, again.stderr

"""WORKERS=auto on the kubernetes platform: 100 Locust workers planned and their objects created on a real
kube-apiserver (no kubelet here: the pods themselves are not run)."""

from __future__ import annotations

import pytest

from runner import calibrate
from runner.generator_sizing import load_sized
from runner.locust import LocustOptions
from runner.platforms.kubernetes.loadgen import LocustDeployment, create_locust
from runner.platforms.kubernetes.objects import gateway_key
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.workloads import resources_for
from runner.scenario import Overrides

pytestmark = pytest.mark.kubernetes


def test_auto_plans_and_creates_100_worker_pods(admin, namespace, tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIZER_CACHE", str(tmp_path / "cache"))
    calibrate.save(
        calibrate.Calibration("kubernetes", "fasthttp", 2, 1059.2, 0.8, 662.0, 1.0, 7500.0, 7500.0)
    )  # 7,500 x 6 x 1.1 / (662 x 0.75) = 99.7 -> 100
    overrides = Overrides(platform="kubernetes", client="fasthttp", envoy_cpus="1..6", workers="auto")
    scenario, note = load_sized("local", overrides)
    assert scenario.load.workers == 100 and note is not None
    load = scenario.load
    spec = LocustDeployment(
        namespace=namespace,
        image="localhost/locust:2.47.0",
        pull_policy="Never",
        user_class="FastGatewayUser",
        locustfile=load.locustfile,
        options=LocustOptions.from_load(load),
        gateway_url=scenario.kubernetes.gateway_url,
        workers=load.workers,
        worker_resources=resources_for(1.0, 512 * 2**20),
        run_id="20261123-000000-auto",
        gateway=gateway_key("projectcontour", "envoy"),
        targets=(scenario.kubernetes.gateway_url,),
        token="t",
    )
    create_locust(admin, spec, ClusterChanges(tmp_path / "originals.json"))
    workers = admin.apps.read_namespaced_deployment(spec.names.worker, namespace)
    assert workers.spec.replicas == 100
    args = workers.spec.template.spec.containers[0].args
    assert "--worker" in args and args[args.index("--master-host") + 1] == spec.names.master
    master = admin.apps.read_namespaced_deployment(spec.names.master, namespace).spec.template.spec.containers[0]
    assert master.resources.limits == {"cpu": "500m", "memory": "512Mi"}  # the one master takes all 100 workers

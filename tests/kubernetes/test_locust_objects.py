"""Locust master, workers, Service and locustfiles ConfigMap as real API objects."""

from __future__ import annotations

import pytest

from runner.errors import UsageError
from runner.locust import LocustOptions
from runner.platforms.kubernetes.connection import NotFoundError
from runner.platforms.kubernetes.loadgen import CONFIGMAP, MASTER, WORKER, LocustDeployment, create_locust
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.workloads import resources_for
from runner.scenario import PROJECT_ROOT, parse_scenario

pytestmark = pytest.mark.kubernetes
LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"


def _spec(namespace: str, workers: int = 3) -> LocustDeployment:
    return LocustDeployment(
        namespace=namespace,
        image="localhost/locust:2.47.0",
        pull_policy="Never",
        user_class="LeanGatewayUser",
        locustfile=LOCUSTFILE,
        options=LocustOptions("external.nginx", "/index.html"),
        gateway_url="http://envoy.projectcontour.svc.cluster.local",
        workers=workers,
        worker_resources=resources_for(1.0, 512 * 2**20),
        run_id="20261122-000000-test",
    )


def test_locust_objects_are_created_with_the_run_options_and_deleted_by_undo(admin, namespace, tmp_path):
    changes = ClusterChanges(tmp_path / "originals.json")
    create_locust(admin, _spec(namespace), changes)
    assert [c["name"] for c in changes.created] == [CONFIGMAP, MASTER, MASTER, WORKER]

    files = admin.core.read_namespaced_config_map(CONFIGMAP, namespace).data
    assert {"gateway.py", "gateway_sizer_stats.py"} <= set(files)
    assert files["gateway.py"] == LOCUSTFILE.read_text()

    master = admin.apps.read_namespaced_deployment(MASTER, namespace).spec.template.spec.containers[0]
    assert master.args[:2] == [
        "-f",
        "/home/locust/locustfiles/gateway.py,/home/locust/locustfiles/gateway_sizer_stats.py",
    ]
    assert "--master" in master.args and master.args[-1] == "LeanGatewayUser"
    assert master.args[master.args.index("--host") + 1] == "http://envoy.projectcontour.svc.cluster.local"
    assert master.args[master.args.index("--request-path") + 1] == "/index.html"
    assert master.image_pull_policy == "Never"

    service = admin.core.read_namespaced_service(MASTER, namespace)
    assert sorted(p.port for p in service.spec.ports) == [5557, 8089]

    workers = admin.apps.read_namespaced_deployment(WORKER, namespace)
    assert workers.spec.replicas == 3
    worker = workers.spec.template.spec.containers[0]
    assert worker.args[worker.args.index("--master-host") + 1] == MASTER
    assert worker.resources.limits == worker.resources.requests == {"cpu": "1", "memory": "512Mi"}

    undo(admin, changes, timeout_s=1, wait=False)
    assert changes.created == []
    for read, name in (
        (admin.core.read_namespaced_config_map, CONFIGMAP),
        (admin.core.read_namespaced_service, MASTER),
    ):
        with pytest.raises(Exception) as gone:
            read(name, namespace)
        assert getattr(gone.value, "status", None) == 404 or isinstance(gone.value, NotFoundError)


def _platform(namespace: str, tmp_path) -> KubernetesPlatform:
    scenario = parse_scenario(
        {"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]}, "kubernetes": {"namespace": namespace}}
    )
    platform = KubernetesPlatform(scenario, tmp_path)
    platform.cluster = None
    return platform


def test_leftovers_of_a_killed_run_are_removed_before_a_new_run(admin, namespace, tmp_path):
    create_locust(admin, _spec(namespace), ClusterChanges(tmp_path / "old.json"))
    platform = _platform(namespace, tmp_path)
    platform._remove_leftover_locust(admin)
    assert admin.apps.list_namespaced_deployment(namespace).items == []
    assert all(c.metadata.name != CONFIGMAP for c in admin.core.list_namespaced_config_map(namespace).items)


def test_objects_with_our_names_made_by_someone_else_are_left_alone(admin, namespace, tmp_path):
    admin.core.create_namespaced_config_map(namespace, {"metadata": {"name": CONFIGMAP}, "data": {"a": "b"}})
    with pytest.raises(UsageError, match=f"ConfigMap {namespace}/{CONFIGMAP} exists and was not made by gateway-sizer"):
        _platform(namespace, tmp_path)._remove_leftover_locust(admin)
    assert admin.core.read_namespaced_config_map(CONFIGMAP, namespace).data == {"a": "b"}


def test_the_service_proxy_session_trusts_the_cluster_ca_whatever_requests_ca_bundle_says(admin, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")  # a bundle without the cluster CA
    response = admin.session().get(f"{admin.host}/version", timeout=10)
    assert response.status_code == 200 and response.json()["gitVersion"].startswith("v1.34")
    proxied = admin.session().get(admin.service_proxy_url("default", "kubernetes", 443) + "/version", timeout=10)
    assert proxied.json()["kind"] == "Status"  # the API server's own answer about the proxy, not a TLS failure

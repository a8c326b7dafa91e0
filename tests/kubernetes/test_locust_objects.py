"""Locust master, workers, Service and locustfiles ConfigMap as real API objects."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from runner.errors import UsageError
from runner.locust import TARGETS_ENV, TOKEN_ENV
from runner.platforms.kubernetes.connection import NotFoundError
from runner.platforms.kubernetes.loadgen import ClusterLocust, LocustNames, create_locust
from runner.platforms.kubernetes.objects import GATEWAY_LABEL, RUN_LABEL, gateway_key
from runner.platforms.kubernetes.originals import ClusterChanges, delete_created, undo
from runner.platforms.kubernetes.worker_port import WORKER_HOST_ENV
from runner.scenario import parse_scenario
from support.k8s import LOCUST_RUN, LOCUST_TOKEN, LOCUSTFILE, locust_spec

pytestmark = pytest.mark.kubernetes


def test_locust_objects_are_created_with_the_run_options_and_deleted_by_undo(admin, namespace, tmp_path):
    changes = ClusterChanges(tmp_path / "originals.json")
    spec = locust_spec(namespace)
    names = spec.names
    create_locust(admin, spec, changes)
    assert [c["name"] for c in changes.created] == [names.token, names.configmap, names.master, names.master,
                                                    names.master, names.worker]  # fmt: skip
    assert [c["kind"] for c in changes.created][2] == "NetworkPolicy"  # before the master it closes
    assert changes.created[0]["uid"]  # a Secret is deleted with its uid as a precondition: the runner reads none
    assert names.master == "locust-master-" + names.master.rsplit("-", 1)[1] and len(names.master) == 22

    files = admin.core.read_namespaced_config_map(names.configmap, namespace).data
    assert {
        "gateway.py",
        "gateway_sizer_stats.py",
        "gateway_sizer_fetch.py",
        "lean_http.py",
        "connection_holder.py",
        "route_probe.py",
    } <= set(files)
    assert files["gateway.py"] == LOCUSTFILE.read_text()

    master = admin.apps.read_namespaced_deployment(names.master, namespace)
    assert master.metadata.labels[RUN_LABEL] == LOCUST_RUN
    assert master.metadata.labels[GATEWAY_LABEL] == gateway_key("projectcontour", "envoy")
    container = master.spec.template.spec.containers[0]
    assert container.args[:2] == [
        "-f",
        "/home/locust/locustfiles/gateway.py,/home/locust/locustfiles/gateway_sizer_stats.py,"
        "/home/locust/locustfiles/gateway_sizer_guard.py,"  # commands from the run only, load to its targets only
        "/home/locust/locustfiles/gateway_sizer_fetch.py",  # the master's GET through the gateway
    ]
    env = {e.name: e for e in container.env}
    assert env[TARGETS_ENV].value == "http://envoy.projectcontour.svc.cluster.local"
    reference = env[TOKEN_ENV].value_from.secret_key_ref
    token = admin.core.read_namespaced_secret(reference.name, namespace).data[reference.key]
    assert reference.name == names.token and base64.b64decode(token).decode() == LOCUST_TOKEN
    assert "--master" in container.args and container.args[-1] == "LeanGatewayUser"
    assert container.args[container.args.index("--host") + 1] == "http://envoy.projectcontour.svc.cluster.local"
    assert container.args[container.args.index("--request-path") + 1] == "/index.html"
    assert container.image_pull_policy == "Never"

    service = admin.core.read_namespaced_service(names.master, namespace)
    assert sorted(p.port for p in service.spec.ports) == [5557, 8089]

    workers = admin.apps.read_namespaced_deployment(names.worker, namespace)
    assert workers.spec.replicas == 3
    worker = workers.spec.template.spec.containers[0]
    assert worker.args[worker.args.index("--master-host") + 1] == names.master
    assert worker.resources.limits == worker.resources.requests == {"cpu": "1", "memory": "512Mi"}
    worker_env = {e.name: e.value for e in worker.env}
    assert worker_env[TARGETS_ENV] == "http://envoy.projectcontour.svc.cluster.local" and TOKEN_ENV not in worker_env
    assert "/home/locust/locustfiles/gateway_sizer_guard.py" in worker.args[1]
    # the workers' host name, made for the run, is the only one the master takes messages from
    host = workers.spec.template.spec.hostname
    assert host.startswith("locust-worker-") and env[WORKER_HOST_ENV].value == host
    assert WORKER_HOST_ENV not in worker_env

    # the master's worker port open to the run's workers only, its web API to anyone (token-gated): the API server
    # accepted the shape; its selectors pick exactly the master's and the workers' pods
    policy: Any = client.NetworkingV1Api(admin.api).read_namespaced_network_policy(names.master, namespace).spec
    assert policy.pod_selector.match_labels == master.spec.template.metadata.labels
    assert policy.policy_types == ["Ingress"]
    (from_workers, web) = policy.ingress
    (peer,) = from_workers.var_from
    assert peer.pod_selector.match_labels == workers.spec.template.metadata.labels and peer.namespace_selector is None
    assert [(p.protocol, p.port) for p in from_workers.ports] == [("TCP", 5557)]
    assert web.var_from is None and [(p.protocol, p.port) for p in web.ports] == [("TCP", 8089)]

    undo(admin, changes, timeout_s=1, wait=False)
    assert changes.created == []
    for read, name in (
        (admin.core.read_namespaced_config_map, names.configmap),
        (admin.core.read_namespaced_service, names.master),
        (admin.core.read_namespaced_secret, names.token),
        (client.NetworkingV1Api(admin.api).read_namespaced_network_policy, names.master),
    ):
        with pytest.raises(ApiException) as gone:
            read(name, namespace)
        assert gone.value.status == 404


def test_two_runs_get_objects_of_their_own(admin, namespace, tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    create_locust(admin, locust_spec(namespace, run_id="run-a"), ClusterChanges(tmp_path / "a" / "originals.json"))
    create_locust(admin, locust_spec(namespace, run_id="run-b"), ClusterChanges(tmp_path / "b" / "originals.json"))
    names = {d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items}
    expected = {LocustNames(r).master for r in ("run-a", "run-b")} | {LocustNames(r).worker for r in ("run-a", "run-b")}
    assert names == expected


def _loadgen(namespace: str, tmp_path, run_id: str = "new-run", gateway: str = "projectcontour/envoy") -> ClusterLocust:
    ns, name = gateway.split("/")
    scenario = parse_scenario(
        {
            "name": "t",
            "platform": "kubernetes",
            "envoy": {"cpu": [1], "workload": {"namespace": ns, "name": name, "container": "envoy"}},
            "kubernetes": {"namespace": namespace},
        }
    )
    (tmp_path / run_id).mkdir(exist_ok=True)
    return ClusterLocust(scenario, run_id, ClusterChanges(tmp_path / run_id / "originals.json"))


def test_leftovers_of_a_killed_run_on_the_same_gateway_are_found_by_labels_and_removed(admin, namespace, tmp_path):
    (tmp_path / "old").mkdir()
    create_locust(admin, locust_spec(namespace, run_id="old-run"), ClusterChanges(tmp_path / "old" / "originals.json"))
    elsewhere = locust_spec(namespace, run_id="other-gateway-run", gateway="other/envoy")
    create_locust(admin, elsewhere, ClusterChanges(tmp_path / "old" / "other.json"))
    deleted = _loadgen(namespace, tmp_path).remove_leftovers(admin)
    old = LocustNames("old-run")
    assert sorted(deleted) == sorted(
        [
            f"Deployment {namespace}/{old.master}",
            f"Deployment {namespace}/{old.worker}",
            f"Service {namespace}/{old.master}",
            f"ConfigMap {namespace}/{old.configmap}",
            f"NetworkPolicy {namespace}/{old.master}",
            f"Secret {namespace}/{old.token}",  # found by its master's name: the runner lists no Secret
        ]
    )
    with pytest.raises(ApiException):
        admin.core.read_namespaced_secret(old.token, namespace)
    assert admin.core.read_namespaced_secret(elsewhere.names.token, namespace)
    # the objects of a run on another gateway are not leftovers of this one
    left = {d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items}
    assert left == {elsewhere.names.master, elsewhere.names.worker}


def test_an_object_with_the_run_name_made_by_someone_else_is_left_alone(admin, namespace, tmp_path):
    spec = locust_spec(namespace)
    admin.core.create_namespaced_config_map(namespace, {"metadata": {"name": spec.names.configmap}, "data": {"a": "b"}})
    changes = ClusterChanges(tmp_path / "originals.json")
    with pytest.raises(UsageError, match=f"ConfigMap {namespace}/{spec.names.configmap} exists and was not made by"):
        create_locust(admin, spec, changes)
    assert [c["kind"] for c in changes.created] == ["Secret"]  # the token, made before: ours, for undo to delete
    # a tampered originals file that names it: undo leaves it alone too (no managed-by labels)
    changes.created.append({"kind": "ConfigMap", "namespace": namespace, "name": spec.names.configmap})
    done = undo(admin, changes, timeout_s=1, wait=False)
    assert done == [
        f"deleted Secret {namespace}/{spec.names.token}",
        f"left ConfigMap {namespace}/{spec.names.configmap} alone: it lacks gateway-sizer's managed-by labels",
    ]
    assert admin.core.read_namespaced_config_map(spec.names.configmap, namespace).data == {"a": "b"}


def test_locust_pods_pass_pod_security_restricted(admin, namespace):
    """The namespace enforces `restricted` on the real API server: Pods made from the Deployments'
    templates are admitted, and a pod without the settings is not (so the check is real)."""
    admin.core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    spec = locust_spec(namespace)
    for deployment in (spec.master(), spec.worker()):
        template = deployment["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "psa-"}, "spec": template["spec"]}
        created = admin.core.create_namespaced_pod(namespace, pod)
        assert created.spec.security_context.run_as_non_root is True
        assert created.spec.automount_service_account_token is False
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
            "spec": {"containers": [{"name": "c", "image": "example/none:1"}]}}  # fmt: skip
    with pytest.raises(ApiException) as refused:
        admin.core.create_namespaced_pod(namespace, bare)
    assert refused.value.status == 403 and "violates PodSecurity" in refused.value.body


def test_the_service_proxy_session_trusts_the_cluster_ca_whatever_requests_ca_bundle_says(admin, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")  # a bundle without the cluster CA
    response = admin.session().get(f"{admin.host}/version", timeout=10)
    assert response.status_code == 200 and response.json()["gitVersion"].startswith("v1.34")
    proxied = admin.session().get(admin.service_proxy_url("default", "kubernetes", 443) + "/version", timeout=10)
    assert proxied.json()["kind"] == "Status"  # the API server's own answer about the proxy, not a TLS failure


def test_undo_skips_a_created_object_that_is_already_gone(admin, namespace, tmp_path):
    changes = ClusterChanges(tmp_path / "originals.json")
    changes.created.append({"kind": "Service", "namespace": namespace, "name": "never-made"})
    assert undo(admin, changes, timeout_s=1, wait=False) == []
    assert changes.created == []
    with pytest.raises(NotFoundError):
        delete_created(admin, {"kind": "Service", "namespace": namespace, "name": "never-made"})

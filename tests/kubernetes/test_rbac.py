"""The runner's ServiceAccount can do its job and nothing more, checked by real requests to the API server.
(tests/cluster/test_kubernetes_sweep.py runs a whole sweep with it on the one-machine cluster.)"""

from __future__ import annotations

import pytest
from kubernetes import client

from runner import environment
from runner.errors import UsageError
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.connection import call, connect
from runner.platforms.kubernetes.lease import GatewayLease, lease_name
from runner.platforms.kubernetes.loadgen import LocustDeployment, create_locust
from runner.platforms.kubernetes.objects import GROUP, PLURAL, VERSION
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.tls import GatewayTls, object_name
from runner.scenario import WorkloadRef, parse_scenario
from support.k8s import create, kubeconfig_for_token, locust_spec, service_account_token, workload
from support.rbac import CLASSIC, GATEWAY_API, create_all, rendered

pytestmark = pytest.mark.kubernetes
TESTBED_PROXY = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HTTPProxy", "metadata": {"name": "nginx"},
                 "spec": {"virtualhost": {"fqdn": "external.nginx"},
                          "routes": [{"services": [{"name": "nginx", "port": 80}]}]}}  # fmt: skip


@pytest.fixture(scope="module")
def runner_account(admin, apiserver, tmp_path_factory):
    """Connected as the gateway-sizer ServiceAccount, with the project's RBAC applied."""
    # both install modes, as the one-machine cluster applies them
    docs = [d for d in rendered(CLASSIC) + rendered(GATEWAY_API) if d["kind"] != "Namespace"]
    docs = [d for i, d in enumerate(docs) if d not in docs[:i]]
    create_all(admin, docs)
    create(admin, workload("DaemonSet", "projectcontour", "envoy", {"envoy": {}}))
    create(admin, workload("Deployment", "projectcontour", "contour", {"contour": {}}))
    create(admin, workload("Deployment", "gateway-loadtest", "nginx", {"nginx": {}}))
    create(admin, workload("DaemonSet", "kube-system", "other", {"other": {}}))
    create(admin, workload("Deployment", "projectcontour", "other", {"other": {}}))
    create(admin, workload("DaemonSet", "projectcontour", "other", {"other": {}}))
    admin.custom.create_namespaced_custom_object(GROUP, VERSION, "gateway-loadtest", PLURAL, TESTBED_PROXY)
    admin.core.create_namespaced_secret("gateway-loadtest", {"metadata": {"name": "someone-elses"},
                                                             "stringData": {"password": "x"}})  # fmt: skip
    token = service_account_token(admin, "gateway-loadtest", "gateway-sizer")
    path = kubeconfig_for_token(apiserver, token, tmp_path_factory.mktemp("sa") / "kubeconfig")
    yield connect(str(path))
    for kind, ns, name in (
        ("DaemonSet", "projectcontour", "envoy"),
        ("Deployment", "projectcontour", "contour"),
        ("Deployment", "gateway-loadtest", "nginx"),
        ("DaemonSet", "kube-system", "other"),
        ("Deployment", "projectcontour", "other"),
        ("DaemonSet", "projectcontour", "other"),
    ):
        (admin.apps.delete_namespaced_daemon_set if kind == "DaemonSet" else admin.apps.delete_namespaced_deployment)(
            name, ns
        )
    admin.custom.delete_namespaced_custom_object(GROUP, VERSION, "gateway-loadtest", PLURAL, "nginx")
    admin.core.delete_namespaced_secret("someone-elses", "gateway-loadtest")


def test_the_runner_account_patches_the_gateway_and_scales_the_backend(runner_account):
    envoy = wl.find(runner_account, WorkloadRef(namespace="projectcontour", name="envoy", container="envoy"), "envoy")
    wl.set_resources(runner_account, envoy, wl.resources_for(2, 2**30))
    assert wl.get_resources(runner_account, envoy)["limits"]["cpu"] == "2"
    contour = wl.find(
        runner_account, WorkloadRef(namespace="projectcontour", name="contour", container="contour"), "contour"
    )
    wl.set_resources(runner_account, contour, wl.resources_for(1, 2**30))
    # found as the sweep finds it: the kind is read (DaemonSet first), which the account must be allowed to do
    nginx = wl.find(
        runner_account, WorkloadRef(namespace="gateway-loadtest", name="nginx", container="nginx"), "backend"
    )
    assert nginx.kind == "Deployment"
    wl.scale(runner_account, nginx, 3)
    assert wl.replicas(runner_account, nginx) == 3


def test_the_runner_account_annotates_the_workloads_it_changes(runner_account):
    for kind, ns, name in (("DaemonSet", "projectcontour", "envoy"), ("Deployment", "gateway-loadtest", "nginx")):
        target = wl.Workload(kind, ns, name, name)
        wl.mark_changed(runner_account, target, "rbac-run")
        assert wl.changed_by(runner_account, target) == "rbac-run"
        wl.unmark_changed(runner_account, target, "rbac-run")
        assert wl.changed_by(runner_account, target) is None


def test_the_runner_account_holds_the_gateways_lease(runner_account):
    envoy = "DaemonSet projectcontour/envoy"
    lease = GatewayLease(runner_account, "gateway-loadtest", envoy, "projectcontour", "envoy", "rbac-run")
    lease.acquire()
    lease.renew()
    assert lease.renewals == 1 and lease.name == "gateway-sizer.projectcontour.envoy"
    lease.release()
    assert lease.read() is None


def test_the_runner_account_deletes_a_sizing_fleets_contour_lease_and_reads_none(runner_account, admin, tmp_path):
    """The Lease the sizing fleet's Contour leaves in projectcontour goes by name (restore of a killed run's record);
    production's Contour's stays, and the account may not read, list or write a Lease there."""
    leases = client.CoordinationV1Api(admin.api)
    fleet, production = "leader-elect-gateway-sizer-0123abcd", "leader-elect-gateway-sizer"
    for name in (fleet, production):
        leases.create_namespaced_lease("projectcontour", {"metadata": {"name": name}, "spec": {"holderIdentity": "c"}})
    changes = ClusterChanges(tmp_path / "kubernetes-originals.json")
    changes.created = [{"kind": "Lease", "namespace": "projectcontour", "name": n} for n in (fleet, production)]
    try:
        done = undo(runner_account, changes, 5, wait=False)
        assert f"deleted Lease projectcontour/{fleet}" in done, done
        assert any(f"left Lease projectcontour/{production} alone" in line for line in done), done
        assert [lease.metadata.name for lease in leases.list_namespaced_lease("projectcontour").items] == [production]
        own = client.CoordinationV1Api(runner_account.api)
        for attempt in (
            lambda: call("read", own.read_namespaced_lease, production, "projectcontour"),
            lambda: call("list", own.list_namespaced_lease, "projectcontour"),
            lambda: call("create", own.create_namespaced_lease, "projectcontour", {"metadata": {"name": fleet}}),
        ):
            with pytest.raises(UsageError, match="forbidden"):
                attempt()
    finally:
        leases.delete_namespaced_lease(production, "projectcontour")


def test_the_runner_account_reaches_prometheus_through_the_service_proxy_and_no_other_service(runner_account):
    session = runner_account.session()
    prometheus = session.get(runner_account.service_proxy_url("monitoring", "prometheus", 9090) + "/-/ready")
    assert prometheus.status_code != 403, prometheus.text  # 404 or 503: no Prometheus runs here, but allowed
    other = session.get(runner_account.service_proxy_url("monitoring", "grafana", 3000) + "/")
    assert other.status_code == 403


def test_describe_records_nodes_it_may_not_read_instead_of_failing(runner_account, tmp_path):
    scenario = parse_scenario(
        {"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]}, "kubernetes": {"target": "live"}}
    )
    platform = KubernetesPlatform(scenario, tmp_path / "run", live=True)
    platform.cluster = runner_account
    platform.fleet.find(runner_account)
    facts = platform.describe()
    assert facts["kubernetes"].startswith("v1.34")
    assert "nodes" not in facts  # nothing guessed
    policy = facts["isolation"]["cpu_manager_policy"]
    assert policy.startswith("unknown (nodes not readable: forbidden to list nodes"), policy
    environment.collect(facts, {})  # and the facts still make a valid environment record


def test_the_runner_account_creates_and_deletes_the_locust_objects(runner_account, tmp_path):
    changes = ClusterChanges(tmp_path / "originals.json")
    spec: LocustDeployment = locust_spec("gateway-loadtest", workers=2)
    create_locust(runner_account, spec, changes)
    undo(runner_account, changes, timeout_s=1, wait=False)
    assert changes.created == []


def test_the_runner_account_makes_and_removes_the_tls_objects_and_reads_no_secret(runner_account, admin, tmp_path):
    scenario = parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]},
                               "profiles": ["plain", "tls", "tls-ecdsa"]})  # fmt: skip
    # a killed run's objects first: the next run finds them by label and deletes them, Secrets unread
    (tmp_path / "killed").mkdir()
    GatewayTls(scenario, "killed-run", ClusterChanges(tmp_path / "killed" / "originals.json")).create(runner_account)
    changes = ClusterChanges(tmp_path / "originals.json")
    tls = GatewayTls(scenario, "rbac-run", changes)
    tls.create(runner_account)
    made = [object_name("rbac-run", key) for key in ("rsa-2048", "ecdsa-p256")]
    killed = [object_name("killed-run", key) for key in ("rsa-2048", "ecdsa-p256")]
    secrets = {s.metadata.name for s in admin.core.list_namespaced_secret("gateway-loadtest").items}
    assert set(made) <= secrets and not set(killed) & secrets
    with pytest.raises(UsageError, match="forbidden"):  # not even the Secret it made
        call("read a Secret", runner_account.core.read_namespaced_secret, made[0], "gateway-loadtest")
    for name in made:  # Contour's part, done by hand here
        admin.custom.patch_namespaced_custom_object_status(GROUP, VERSION, "gateway-loadtest", PLURAL, name,
                                                           {"status": {"currentStatus": "valid"}})  # fmt: skip
    tls.wait_valid(runner_account, timeout_s=5)
    undo(runner_account, changes, timeout_s=1, wait=False)
    assert changes.created == []
    secrets = {s.metadata.name for s in admin.core.list_namespaced_secret("gateway-loadtest").items}
    proxies = admin.custom.list_namespaced_custom_object(GROUP, VERSION, "gateway-loadtest", PLURAL)["items"]
    assert "someone-elses" in secrets and not set(made) & secrets
    assert [p["metadata"]["name"] for p in proxies] == ["nginx"]


CLUSTER_ADMIN_FOR_THE_RUNNER = {
    "metadata": {"name": "x"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    "subjects": [{"kind": "ServiceAccount", "name": "gateway-sizer", "namespace": "gateway-loadtest"}],
}


def _lease_body(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": "x"}}


@pytest.mark.parametrize(
    ("action", "attempt"),
    [
        (
            "patch a DaemonSet outside projectcontour",
            lambda c: wl.set_resources(c, wl.Workload("DaemonSet", "kube-system", "other", "other"), {}),
        ),
        (
            "patch a DaemonSet in projectcontour that is not the gateway",
            lambda c: wl.set_resources(c, wl.Workload("DaemonSet", "projectcontour", "other", "other"), {}),
        ),
        ("read Secrets", lambda c: call("list secrets", c.core.list_namespaced_secret, "gateway-loadtest")),
        (
            "read a Secret it did not create",
            lambda c: call("read", c.core.read_namespaced_secret, "someone-elses", "gateway-loadtest"),
        ),
        (
            "watch Secrets",
            lambda c: call("watch", c.core.list_namespaced_secret, "gateway-loadtest", watch=True, timeout_seconds=1),
        ),
        (
            "change a Secret",
            lambda c: call(
                "patch",
                c.core.patch_namespaced_secret,
                "someone-elses",
                "gateway-loadtest",
                {"metadata": {"labels": {"x": "y"}}},
            ),
        ),
        (
            "change the test bed's HTTPProxy",
            lambda c: call(
                "patch",
                c.custom.patch_namespaced_custom_object,
                GROUP,
                VERSION,
                "gateway-loadtest",
                PLURAL,
                "nginx",
                {"metadata": {"labels": {"x": "y"}}},
            ),
        ),
        (
            "create an HTTPProxy in projectcontour",
            lambda c: call(
                "create",
                c.custom.create_namespaced_custom_object,
                GROUP,
                VERSION,
                "projectcontour",
                PLURAL,
                {**TESTBED_PROXY, "metadata": {"name": "x"}},
            ),
        ),
        ("read Secrets elsewhere", lambda c: call("list secrets", c.core.list_namespaced_secret, "projectcontour")),
        ("list pods in another namespace", lambda c: call("list pods", c.core.list_namespaced_pod, "kube-system")),
        (
            "create a DaemonSet in projectcontour",
            lambda c: call(
                "create",
                c.apps.create_namespaced_daemon_set,
                "projectcontour",
                workload("DaemonSet", "projectcontour", "x", {"x": {}}),
            ),
        ),
        (
            "delete the gateway",
            lambda c: call("delete", c.apps.delete_namespaced_daemon_set, "envoy", "projectcontour"),
        ),
        (
            "take the Lease of another gateway",
            lambda c: call(
                "replace",
                client.CoordinationV1Api(c.api).replace_namespaced_lease,
                lease_name("other", "envoy"),
                "gateway-loadtest",
                _lease_body(lease_name("other", "envoy")),
            ),
        ),
        ("list nodes", lambda c: call("list nodes", c.core.list_node)),
        (
            "create a Namespace (cluster-scoped)",
            lambda c: call("create", c.core.create_namespace, {"metadata": {"name": "x"}}),
        ),
        (
            "bind a ClusterRole (cluster-scoped)",
            lambda c: call(
                "create",
                client.RbacAuthorizationV1Api(c.api).create_cluster_role_binding,
                {
                    "metadata": {"name": "x"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "gateway-sizer", "namespace": "gateway-loadtest"}],
                },
            ),
        ),
    ],
)
def test_the_runner_account_is_denied_outside_its_scope(runner_account, action, attempt):
    with pytest.raises(UsageError, match="forbidden"):
        attempt(runner_account)


def test_the_runner_account_creates_and_deletes_a_sizing_fleet_beside_envoy_and_only_reads_production(
    runner_account, admin, tmp_path
):
    envoy = admin.apps.read_namespaced_daemon_set("envoy", "projectcontour")
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "envoy", "uid": envoy.metadata.uid}
    metadata = {"name": "envoy-rbac1", "labels": {"app": "envoy"}, "ownerReferences": [owner]}
    spec = {"nodeName": "node-a", "containers": [{"name": "envoy", "image": "x"}]}
    admin.core.create_namespaced_pod("projectcontour", {"metadata": metadata, "spec": spec})
    wanted = admin.apps.read_namespaced_deployment("nginx", "gateway-loadtest").spec.replicas  # another test scales it
    done = {"replicas": wanted, "updatedReplicas": wanted, "readyReplicas": wanted, "availableReplicas": wanted}
    # as if rolled out: no controller runs beside this API server
    admin.apps.patch_namespaced_deployment_status(
        "nginx", "gateway-loadtest", {"status": {"observedGeneration": 1000, **done}}
    )
    service = {"metadata": {"name": "envoy"}, "spec": {"selector": {"app": "envoy"}, "ports": [{"port": 80}]}}
    admin.core.create_namespaced_service("projectcontour", service)
    before = admin.api.sanitize_for_serialization(admin.apps.read_namespaced_daemon_set("envoy", "projectcontour"))
    scenario = parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]}})
    (tmp_path / "20261128-000000-rbac").mkdir()
    platform = KubernetesPlatform(scenario, tmp_path / "20261128-000000-rbac")
    platform.cluster = runner_account
    try:
        platform.claim(runner_account)
        name = platform.fleet.workload.name
        assert admin.apps.read_namespaced_deployment(name, "projectcontour").spec.replicas == 1
        assert admin.core.read_namespaced_service(name, "projectcontour").spec.type == "ClusterIP"
    finally:
        platform.stop()
        admin.core.delete_namespaced_pod("envoy-rbac1", "projectcontour")
        admin.core.delete_namespaced_service("envoy", "projectcontour")
    assert [
        d.metadata.name
        for d in admin.apps.list_namespaced_deployment("projectcontour").items
        if d.metadata.name.startswith("gateway-sizer-")
    ] == []
    after = admin.api.sanitize_for_serialization(admin.apps.read_namespaced_daemon_set("envoy", "projectcontour"))
    assert after == before

"""The runner's ServiceAccount can do its job and nothing more, checked by real requests to the API server."""

from __future__ import annotations

import pytest
import yaml
from k8s_objects import create, kubeconfig_for_token, service_account_token, workload
from kubernetes import utils
from test_locust_objects import _spec

from runner.errors import UsageError
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.connection import call, connect
from runner.platforms.kubernetes.loadgen import LocustDeployment, create_locust
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from runner.scenario import PROJECT_ROOT, WorkloadRef

pytestmark = pytest.mark.kubernetes
RBAC = PROJECT_ROOT / "k8s" / "manifests" / "rbac"


@pytest.fixture(scope="module")
def runner_account(admin, apiserver, tmp_path_factory):
    """Connected as the gateway-sizer ServiceAccount, with the project's RBAC applied."""
    docs = [
        d
        for f in sorted(RBAC.glob("*.yaml"))
        if f.name != "kustomization.yaml"
        for d in yaml.safe_load_all(f.read_text())
        if d and d["kind"] != "Namespace"
    ]
    utils.create_from_yaml(admin.api, yaml_objects=docs)
    create(admin, workload("DaemonSet", "projectcontour", "envoy", {"envoy": {}}))
    create(admin, workload("Deployment", "projectcontour", "contour", {"contour": {}}))
    create(admin, workload("Deployment", "gateway-loadtest", "nginx", {"nginx": {}}))
    create(admin, workload("DaemonSet", "kube-system", "other", {"other": {}}))
    token = service_account_token(admin, "gateway-loadtest", "gateway-sizer")
    path = kubeconfig_for_token(apiserver, token, tmp_path_factory.mktemp("sa") / "kubeconfig")
    yield connect(str(path))
    for kind, ns, name in (
        ("DaemonSet", "projectcontour", "envoy"),
        ("Deployment", "projectcontour", "contour"),
        ("Deployment", "gateway-loadtest", "nginx"),
        ("DaemonSet", "kube-system", "other"),
    ):
        (admin.apps.delete_namespaced_daemon_set if kind == "DaemonSet" else admin.apps.delete_namespaced_deployment)(
            name, ns
        )


def test_the_runner_account_patches_the_gateway_and_scales_the_backend(runner_account):
    envoy = wl.find(runner_account, WorkloadRef(namespace="projectcontour", name="envoy", container="envoy"), "envoy")
    wl.set_resources(runner_account, envoy, wl.resources_for(2, 2**30))
    assert wl.get_resources(runner_account, envoy)["limits"]["cpu"] == "2"
    contour = wl.find(
        runner_account, WorkloadRef(namespace="projectcontour", name="contour", container="contour"), "contour"
    )
    wl.set_resources(runner_account, contour, wl.resources_for(1, 2**30))
    nginx = wl.Workload("Deployment", "gateway-loadtest", "nginx", "nginx")
    wl.scale(runner_account, nginx, 3)
    assert wl.replicas(runner_account, nginx) == 3


def test_the_runner_account_creates_and_deletes_the_locust_objects(runner_account, tmp_path):
    changes = ClusterChanges(tmp_path / "originals.json")
    spec: LocustDeployment = _spec("gateway-loadtest", workers=2)
    create_locust(runner_account, spec, changes)
    undo(runner_account, changes, timeout_s=1, wait=False)
    assert changes.created == []


@pytest.mark.parametrize(
    ("action", "attempt"),
    [
        (
            "patch a DaemonSet outside projectcontour",
            lambda c: wl.set_resources(c, wl.Workload("DaemonSet", "kube-system", "other", "other"), {}),
        ),
        ("read Secrets", lambda c: call("list secrets", c.core.list_namespaced_secret, "gateway-loadtest")),
        (
            "create a Deployment in projectcontour",
            lambda c: call(
                "create",
                c.apps.create_namespaced_deployment,
                "projectcontour",
                workload("Deployment", "projectcontour", "x", {"x": {}}),
            ),
        ),
        (
            "delete the gateway",
            lambda c: call("delete", c.apps.delete_namespaced_daemon_set, "envoy", "projectcontour"),
        ),
        ("list nodes", lambda c: call("list nodes", c.core.list_node)),
    ],
)
def test_the_runner_account_is_denied_outside_its_scope(runner_account, action, attempt):
    with pytest.raises(UsageError, match="forbidden"):
        attempt(runner_account)

"""Each install mode's RBAC grants what its runs do and no more (k8s/manifests/rbac for a classic install,
k8s/manifests/rbac/gateway-api for a Gateway API one), asked of a real API server as each mode's ServiceAccount.
The grants of the two kustomizations are given to two accounts of their own, side by side."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client

from runner.platforms.kubernetes.connection import Cluster, connect
from support.k8s import kubeconfig_for_token, service_account_token
from support.rbac import ACCOUNT_NAMESPACE, CLASSIC, GATEWAY_API, create_all, granted_to, rendered

pytestmark = pytest.mark.kubernetes

Can = Callable[..., bool]  # (verb, "[group/]resource[/subresource]", namespace[, name]) -> allowed


def _parts(resource: str) -> tuple[str, str, str]:
    """ "apps/daemonsets" -> ("apps", "daemonsets", ""); "pods/resize" -> ("", "pods", "resize")."""
    head, _, rest = resource.partition("/")
    if head in ("apps", "autoscaling") or "." in head:
        plural, _, subresource = rest.partition("/")
        return head, plural, subresource
    return "", head, rest


def _asker(connection: Cluster) -> Can:
    api = client.AuthorizationV1Api(connection.api)

    def can(verb: str, resource: str, namespace: str, name: str = "") -> bool:
        group, plural, subresource = _parts(resource)
        attributes = client.V1ResourceAttributes(verb=verb, group=group, resource=plural, subresource=subresource,
                                                 namespace=namespace or None, name=name or None)  # fmt: skip
        spec = client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
        review = api.create_self_subject_access_review(client.V1SelfSubjectAccessReview(spec=spec))
        return bool(review.status.allowed)

    return can


@pytest.fixture(scope="module")
def accounts(admin, apiserver, tmp_path_factory) -> dict[str, Can]:
    """{"classic": can, "gateway-api": can}: each asks as an account holding one kustomization's grants."""
    asked: dict[str, Can] = {}
    for mode, kustomization in (("classic", CLASSIC), ("gateway-api", GATEWAY_API)):
        account = f"sizer-{mode}"
        admin.core.create_namespaced_service_account(ACCOUNT_NAMESPACE, {"metadata": {"name": account}})
        create_all(admin, granted_to(rendered(kustomization), account))
        token = service_account_token(admin, ACCOUNT_NAMESPACE, account)
        path = kubeconfig_for_token(apiserver, token, tmp_path_factory.mktemp(mode) / "kubeconfig")
        asked[mode] = _asker(connect(str(path)))
    return asked


@pytest.mark.parametrize("mode", ["classic", "gateway-api"])
def test_both_modes_publish_a_jobs_records_again_and_close_the_master_with_a_networkpolicy(accounts, mode):
    can = accounts[mode]
    assert can("update", "configmaps", ACCOUNT_NAMESPACE)  # the results ConfigMap after every change
    assert can("create", "networking.k8s.io/networkpolicies", ACCOUNT_NAMESPACE)
    assert can("delete", "networking.k8s.io/networkpolicies", ACCOUNT_NAMESPACE)
    assert can("create", "secrets", ACCOUNT_NAMESPACE) and can("delete", "secrets", ACCOUNT_NAMESPACE)
    assert not can("get", "secrets", ACCOUNT_NAMESPACE)
    assert not can("update", "configmaps", "projectcontour")
    assert not can("create", "networking.k8s.io/networkpolicies", "projectcontour")


def test_only_a_classic_install_patches_envoy_and_contour(accounts):
    classic, gateway = accounts["classic"], accounts["gateway-api"]
    assert classic("patch", "pods/resize", "projectcontour")
    # the Gateway API sizing fleet's Envoy pods are resized in place too; their names are the provisioner's random
    # ones, so the grant cannot name them (issue 29); the live Gateway's Envoy is rolled out, never resized
    assert gateway("patch", "pods/resize", "projectcontour")
    assert classic("patch", "apps/daemonsets", "projectcontour", "envoy")
    assert classic("patch", "apps/deployments", "projectcontour", "contour")
    assert not gateway("patch", "apps/daemonsets", "projectcontour", "envoy")
    assert not gateway("patch", "apps/deployments", "projectcontour", "contour")
    assert gateway("get", "apps/deployments", "projectcontour", "envoy-gateway-sizer")  # read, as both do


def test_only_a_gateway_api_install_deletes_a_lease_in_the_gateways_namespace_and_reads_none(accounts):
    classic, gateway = accounts["classic"], accounts["gateway-api"]
    # the Lease the sizing fleet's Contour leaves: a name per run, so the grant cannot name it
    assert gateway("delete", "coordination.k8s.io/leases", "projectcontour", "leader-elect-gateway-sizer-0123abcd")
    assert not classic("delete", "coordination.k8s.io/leases", "projectcontour")
    for verb in ("get", "list", "watch", "create", "update", "patch"):
        assert not gateway(verb, "coordination.k8s.io/leases", "projectcontour"), verb
    assert not gateway("delete", "coordination.k8s.io/leases", "kube-system")


def test_a_gateway_api_restore_may_nudge_any_gateway_in_the_gateways_namespace_and_none_elsewhere(accounts):
    gateway = accounts["gateway-api"]
    # restore updates every Gateway whose class names the restored ContourDeployment (class_gateways.nudge)
    assert gateway("list", "gateway.networking.k8s.io/gateways", "")
    assert gateway("get", "gateway.networking.k8s.io/gateways", "projectcontour", "created-meanwhile")
    assert gateway("patch", "gateway.networking.k8s.io/gateways", "projectcontour", "created-meanwhile")
    assert not gateway("patch", "gateway.networking.k8s.io/gateways", "kube-system", "elsewhere")  # named, not nudged


def test_a_gateway_api_install_keeps_its_certificates_in_its_own_namespace(accounts, admin):
    classic, gateway = accounts["classic"], accounts["gateway-api"]
    assert gateway("patch", "projectcontour.io/contourdeployments", "projectcontour", "gateway-sizer")
    assert gateway("patch", "gateway.networking.k8s.io/gateways", "projectcontour", "gateway-sizer")
    assert gateway("list", "gateway.networking.k8s.io/gatewayclasses", "")
    # no Secret in the Gateway's namespace: the provisioner's xDS certificates live there
    for verb in ("create", "delete", "get", "list"):
        assert not gateway(verb, "secrets", "projectcontour"), verb
        assert not classic(verb, "secrets", "projectcontour"), verb
    # the Gateway names the run's certificates in the run's namespace through a ReferenceGrant shipped with it
    grants = admin.custom.list_namespaced_custom_object("gateway.networking.k8s.io", "v1beta1", ACCOUNT_NAMESPACE,
                                                        "referencegrants")["items"]  # fmt: skip
    (grant,) = [g for g in grants if g["metadata"]["name"].endswith("-sizer-gateway-api")]
    assert grant["spec"]["from"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                      "namespace": "projectcontour"}]  # fmt: skip
    assert grant["spec"]["to"] == [{"group": "", "kind": "Secret"}]


def test_a_classic_install_reads_nothing_of_the_gateway_api(accounts):
    classic = accounts["classic"]
    assert not classic("list", "gateway.networking.k8s.io/gatewayclasses", "")
    assert not classic("list", "gateway.networking.k8s.io/gateways", "")
    assert not classic("patch", "projectcontour.io/contourdeployments", "projectcontour", "gateway-sizer")


@pytest.mark.parametrize("mode", ["classic", "gateway-api"])
def test_both_modes_list_the_autoscalers_that_could_scale_envoy_and_change_none(accounts, mode):
    can = accounts[mode]
    assert can("list", "autoscaling/horizontalpodautoscalers", "projectcontour")
    assert can("list", "keda.sh/scaledobjects", "projectcontour")
    for verb in ("patch", "delete", "create"):
        assert not can(verb, "autoscaling/horizontalpodautoscalers", "projectcontour"), verb
        assert not can(verb, "keda.sh/scaledobjects", "projectcontour"), verb
    assert not can("list", "autoscaling/horizontalpodautoscalers", "kube-system")


def test_a_gateway_api_install_reads_the_backends_namespace_labels_only(accounts):
    classic, gateway = accounts["classic"], accounts["gateway-api"]
    assert gateway("get", "namespaces", "", ACCOUNT_NAMESPACE)  # a listener may select namespaces by label
    assert not gateway("get", "namespaces", "", "kube-system")
    assert not gateway("list", "namespaces", "")
    assert not classic("get", "namespaces", "", ACCOUNT_NAMESPACE)

"""A cluster without the Gateway API, then one whose Gateway API CRDs predate v1 (they serve v1beta1 only), on an
API server of this module's own (the session's has the v1 CRDs): each refused by the CLI in one line naming the
version and the fix, not taken for a missing Gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, utils

from runner.platforms.kubernetes.connection import Cluster, connect
from support.apiserver import ApiServer, start_apiserver
from support.processes import one_line, run_sizer
from support.wait import until

pytestmark = pytest.mark.kubernetes


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Iterator[tuple[ApiServer, Cluster]]:
    """An API server with no CRD installed, and the namespaces a scenario names."""
    server = start_apiserver(tmp_path_factory.mktemp("bare-apiserver"))
    try:
        cluster = connect(str(server.kubeconfig))
        for name in ("projectcontour", "gateway-loadtest"):
            cluster.core.create_namespace({"metadata": {"name": name}})
        yield server, cluster
    finally:
        server.stop()


def _v1beta1_crd(plural: str, kind: str, scope: str) -> dict:
    """A Gateway API CRD as a release before 1.0 shipped it: v1beta1 served, no v1."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.gateway.networking.k8s.io",
            "annotations": {
                "gateway.networking.k8s.io/bundle-version": "v0.8.1",
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/891",
            },
        },
        "spec": {
            "group": "gateway.networking.k8s.io",
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": schema}],
        },
    }


def _sweep(server: ApiServer, tmp_path: Path) -> str:
    data = {
        "name": "pre-v1",
        "platform": "kubernetes",
        "envoy": {"cpu": ["250m"]},
        "kubernetes": {
            "kubeconfig": str(server.kubeconfig),
            "gateway": {"kind": "gateway", "namespace": "projectcontour", "name": "contour"},
        },
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_no_gateway_api_then_one_before_v1_are_each_one_line(bare, tmp_path):
    server, cluster = bare
    one_line(
        run_sizer("sweep", "--scenario", _sweep(server, tmp_path), "--results", str(tmp_path / "r1")),
        "the cluster serves no Gateway API (gateway.networking.k8s.io)",
        "kubernetes.gateway.kind: httpproxy",
    )
    crds = [("gatewayclasses", "GatewayClass", "Cluster"), ("gateways", "Gateway", "Namespaced")]
    for plural, kind, scope in crds:
        utils.create_from_dict(cluster.api, _v1beta1_crd(plural, kind, scope))

    def served() -> bool:
        groups = client.ApisApi(cluster.api).get_api_versions().groups or []
        return any(g.name == "gateway.networking.k8s.io" for g in groups)

    until(served, 30, "the v1beta1 CRDs served", poll_s=0.1)
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "Gateway",
        "metadata": {"name": "contour"},
        "spec": {"gatewayClassName": "contour", "listeners": []},
    }
    custom = client.CustomObjectsApi(cluster.api)
    until(lambda: _created(custom, gateway), 30, "the v1beta1 Gateway created", poll_s=0.2)
    one_line(
        run_sizer("sweep", "--scenario", _sweep(server, tmp_path), "--results", str(tmp_path / "r2")),
        "the cluster's Gateway API CRDs serve v1beta1, not v1 (Gateway API before 1.0)",
        "upgrade them to Gateway API 1.0 or later",
    )


def _created(custom: client.CustomObjectsApi, body: dict) -> bool:
    try:
        custom.create_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1beta1", "projectcontour", "gateways", body
        )
    except client.ApiException as error:
        if error.status == 404:  # the resource not served yet
            return False
        raise
    return True

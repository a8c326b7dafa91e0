"""Fixtures for tests against a real kube-apiserver (marked `kubernetes`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client, utils

from runner.platforms.kubernetes.connection import Cluster, connect
from support.apiserver import ApiServer, built, start_apiserver
from support.wait import until

NAMESPACES = ("projectcontour", "gateway-loadtest", "monitoring")


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory) -> Iterator[ApiServer]:
    server = start_apiserver(tmp_path_factory.mktemp("apiserver"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def admin(apiserver: ApiServer) -> Cluster:
    """An admin connection; the session's namespaces, Contour's CRDs and the Gateway API's (from the contour
    module) exist."""
    cluster = connect(str(apiserver.kubeconfig))
    for name in NAMESPACES:
        cluster.core.create_namespace({"metadata": {"name": name}})
    examples = built("contour-module") / "examples"
    objects = [
        d
        for crds in (examples / "contour" / "01-crds.yaml", examples / "gateway" / "00-crds.yaml")
        for d in yaml.safe_load_all(crds.read_text())
        if d
    ]
    utils.create_from_yaml(cluster.api, yaml_objects=objects)
    extensions = client.ApiextensionsV1Api(cluster.api)

    def established() -> bool:  # until then the API server answers their resources with 404
        for crd in objects:
            conditions = extensions.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    until(established, 30, "Contour's and the Gateway API's CRDs established", poll_s=0.1)
    return cluster


@pytest.fixture
def namespace(admin: Cluster) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.core.create_namespace({"metadata": {"name": name}})
    yield name
    admin.core.delete_namespace(name)

"""The real one-machine cluster for tests/cluster (make cluster-up; needs root), shared by the session,
and a kubeconfig for the runner's own ServiceAccount on it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from runner.platforms.kubernetes.connection import Cluster, connect
from support.cluster import CACHE, STARTED_BY_TESTS, STATE, make


@pytest.fixture(scope="session")
def cluster() -> Iterator[tuple[Path, Cluster]]:
    """(admin kubeconfig, admin connection); brings the cluster up (and down after) unless it is up."""
    if os.geteuid() != 0:
        pytest.fail("the one-machine cluster needs root: run the cluster tests as root")
    already_up = STATE.exists()
    out = "" if already_up else make("cluster-up", timeout=3300)
    if not already_up:
        os.environ[STARTED_BY_TESTS] = "1"  # tests/cluster_infra may take it down for its fresh-host test
    match = re.search(r"^export KUBECONFIG=(\S+)$", out, re.M)
    kubeconfig = Path(match.group(1)) if match else CACHE / "cluster" / "admin.kubeconfig"
    try:
        yield kubeconfig, connect(str(kubeconfig))
    finally:
        if not already_up:
            make("cluster-down", timeout=600)


@pytest.fixture(scope="session")
def runner_kubeconfig(cluster, tmp_path_factory) -> Path:
    """A kubeconfig for the ServiceAccount gateway-sizer (k8s/manifests/rbac), with a 2 h token."""
    kubeconfig, admin = cluster
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200))
    token = admin.core.create_namespaced_service_account_token("gateway-sizer", "gateway-loadtest", request)
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"] = [{"name": "gateway-sizer", "user": {"token": token.status.token}}]
    config["contexts"] = [
        {"name": "runner", "context": {"cluster": config["clusters"][0]["name"], "user": "gateway-sizer"}}
    ]
    config["current-context"] = "runner"
    path = tmp_path_factory.mktemp("runner") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path

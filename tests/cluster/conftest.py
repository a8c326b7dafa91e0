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
from support.processes import run_sizer
from support.production import left_behind


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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report kept on the test, so a fixture's teardown knows whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def runs_restored_after_a_failure(request, tmp_path) -> Iterator[None]:
    """A test that failed with a run of its own killed or stopped mid-way (a SIGKILL test whose assertion failed
    before its `restore`) would leave that run's objects and lease to the next tests, which then fail on them:
    `restore` each run directory under the test's tmp_path as its user would, and print what is still left."""
    yield
    report = getattr(request.node, "report_call", None)
    if report is None or not report.failed or "cluster" not in request.fixturenames:
        return
    kubeconfig, admin = request.getfixturevalue("cluster")
    if not left_behind(admin):
        return
    for run_dir in sorted({summary.parent.resolve() for summary in tmp_path.rglob("summary.json")}):
        restored = run_sizer("restore", str(run_dir), timeout=600, env={"KUBECONFIG": str(kubeconfig)})
        print(f"restore {run_dir.name} after the failure: exit {restored.returncode}\n{restored.stdout}")
    print(f"left after the restores: {left_behind(admin)}")

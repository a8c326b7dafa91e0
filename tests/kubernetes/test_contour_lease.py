"""The leader-election Lease of a Gateway API sizing fleet's Contour, against a real API server: Contour's provisioner
deletes the Contour it made for the run's Gateway but never the Lease that Contour holds (`leader-elect-<gateway>`),
so the run deletes it, once that Contour's pods are gone, at its end, by `restore` after a SIGKILL and when the next
run deletes a killed run's fleet; production's Contour's Lease stays. support.gateway_api.StandInContour stands in
for the provisioner and that Contour (a pod that makes its Lease again while it runs, a second after the provisioner
deleted its Deployment, as a terminating pod does); tests/cluster runs the real ones."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from runner.platforms.kubernetes.connection import Cluster, connect
from runner.platforms.kubernetes.objects import gateway_key, run_hash, run_labels
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.sizing_gateway import COMPONENT, copy_name
from runner.scenario import parse_scenario
from support import k8s
from support.apiserver import ApiServer
from support.gateway_api import ALL, StandInContour, contour_deployment, gateway, gateway_class, listener
from support.k8s import claimed_run
from support.processes import run_sizer
from support.wait import until

pytestmark = pytest.mark.kubernetes
RUN = "20261128-120000-lease"
MADE_S = 30  # for the stand-in to make a Gateway's Envoy, Contour and Lease


@pytest.fixture
def contour(apiserver: ApiServer, namespace: str) -> Iterator[StandInContour]:
    stand_in = StandInContour(connect(str(apiserver.kubeconfig)), namespace)
    yield stand_in
    stand_in.stop()


def _scenario(apiserver: ApiServer, namespace: str) -> dict[str, Any]:
    return {
        "name": "contour-lease",
        "platform": "kubernetes",
        "envoy": {"cpu": [0.25], "replicas": [1]},
        "backend": {"workload": {"namespace": namespace, "name": "nginx", "container": "nginx"}},
        "kubernetes": {
            "kubeconfig": str(apiserver.kubeconfig),
            "namespace": namespace,
            "gateway": {"kind": "gateway", "namespace": namespace, "name": "gw"},
            "sizing": {"node_selector": {"kubernetes.io/hostname": "node-a"}},
            "rollout_timeout_seconds": 5,
        },
    }


def _production(admin: Cluster, namespace: str, contour: StandInContour) -> None:
    """Production's Gateway `gw` of a Contour class, its Envoy, Contour and Lease made by the stand-in; nginx."""
    k8s.gateway(admin, namespace)
    gateway_class(admin, f"class-{namespace}", contour_deployment(admin, namespace, "params"))
    gateway(admin, namespace, "gw", f"class-{namespace}", [listener(allowedRoutes=ALL)])
    _made(admin, namespace, "leader-elect-gw", contour)


def _lease(admin: Cluster, namespace: str, name: str) -> Any:
    try:
        return client.CoordinationV1Api(admin.api).read_namespaced_lease(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _made(admin: Cluster, namespace: str, lease: str, contour: StandInContour) -> None:
    until(lambda: _lease(admin, namespace, lease), MADE_S, f"Lease {lease} ({contour.error})")


def _gone_for_good(admin: Cluster, namespace: str, lease: str, contour: StandInContour) -> None:
    """The Lease is gone, and still gone once the stand-in has looked many times more (no Contour makes it again)."""
    after = contour.looks + 20
    until(lambda: contour.looks >= after, 10, "20 more looks of the stand-in")
    assert _lease(admin, namespace, lease) is None, f"Lease {namespace}/{lease} left behind"


def test_a_sizing_run_deletes_its_contours_lease_at_its_end_and_production_keeps_its_own(
    apiserver, admin, namespace, tmp_path: Path, contour: StandInContour
):
    _production(admin, namespace, contour)
    lease = f"leader-elect-gateway-sizer-{run_hash(RUN)}"
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(parse_scenario(_scenario(apiserver, namespace)), tmp_path / RUN)
    platform.cluster = admin
    platform.claim(admin)
    _made(admin, namespace, lease, contour)  # as Contour takes it once it runs
    platform.stop()
    _gone_for_good(admin, namespace, lease, contour)
    assert _lease(admin, namespace, "leader-elect-gw").spec.holder_identity == "contour-gw-0"  # production's


def test_a_new_run_deletes_the_contours_lease_of_the_fleet_a_killed_run_left(
    apiserver, admin, namespace, tmp_path: Path, contour: StandInContour
):
    _production(admin, namespace, contour)
    killed = "20261128-110000-killed"  # its fleet left, never restored: a Gateway labelled with production's gateway
    labels = run_labels(COMPONENT, killed, gateway_key(namespace, "envoy-gw"))
    gateway(admin, namespace, copy_name(killed), f"class-{namespace}", [listener()], labels=labels)
    left = f"leader-elect-{copy_name(killed)}"
    _made(admin, namespace, left, contour)
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(parse_scenario(_scenario(apiserver, namespace)), tmp_path / RUN)
    platform.cluster = admin
    try:
        platform.claim(admin)  # deletes the killed run's fleet first
        _gone_for_good(admin, namespace, left, contour)
    finally:
        platform.stop()


def test_restore_deletes_the_contours_lease_of_a_run_killed_hard(
    apiserver, admin, namespace, tmp_path: Path, contour: StandInContour
):
    _production(admin, namespace, contour)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(_scenario(apiserver, namespace)))
    run, run_dir = claimed_run(scenario, tmp_path / "results")
    lease = f"leader-elect-gateway-sizer-{run_hash(run_dir.name)}"
    try:
        _made(admin, namespace, lease, contour)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    result = run_sizer("restore", str(run_dir), timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"deleted Lease {namespace}/{lease}" in result.stdout, result.stdout
    _gone_for_good(admin, namespace, lease, contour)
    assert _lease(admin, namespace, "leader-elect-gw") is not None  # production's

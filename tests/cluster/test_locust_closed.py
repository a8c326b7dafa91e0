"""The Locust a run starts in the cluster is closed to everyone but the run (locustfiles/gateway_sizer_guard.py), on
the one-machine cluster: a pod in another namespace reaches the master's web API and can read it, but cannot start
load; the run's own token cannot point the load anywhere but its targets; a person reads the web UI through a
port-forward. Its objects are made as a run makes them (create_locust) and removed by undo."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from kubernetes.stream import portforward

from runner.errors import LoadGeneratorError
from runner.locust import WEB_PORT, LocustMaster, LocustOptions
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.loadgen import MASTER, LocustDeployment, create_locust
from runner.platforms.kubernetes.objects import label_selector
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from support.k8s import LOCUST_TOKEN, locust_spec
from support.wait import until

pytestmark = pytest.mark.cluster
NAMESPACE = "gateway-loadtest"
GATEWAY = "http://envoy.projectcontour.svc.cluster.local"  # the run's one target here
FOREIGN = f"http://nginx.{NAMESPACE}.svc.cluster.local"  # reachable from the workers, not the run's target
OPTIONS = LocustOptions("external.nginx", "/", user_rps=5.0)  # one user: 5 RPS, for seconds
# A pod of someone else's, in another namespace: reads the master's stats, then asks it for load to the gateway.
STRANGER = """
import json, urllib.error, urllib.parse, urllib.request
base = "http://{master}.{namespace}.svc.cluster.local:{port}"
read = urllib.request.urlopen(base + "/stats/requests", timeout=10).status
form = urllib.parse.urlencode({{"user_count": "50", "spawn_rate": "50", "host": "{gateway}"}}).encode()
try:
    started = urllib.request.urlopen(urllib.request.Request(base + "/swarm", data=form), timeout=10).status
except urllib.error.HTTPError as error:
    started = error.code
print(json.dumps({{"read": read, "swarm": started}}))
"""


@pytest.fixture(scope="module")
def closed(cluster, tmp_path_factory) -> Iterator[tuple[Cluster, LocustDeployment, LocustMaster]]:
    """A run's Locust (one worker) with the gateway as its only target; the runner's client of it."""
    _, admin = cluster
    base = locust_spec(NAMESPACE, workers=1, run_id="20261126-000000-closed", gateway="closed-test/envoy")
    spec = replace(base, targets=(GATEWAY,))
    changes = ClusterChanges(tmp_path_factory.mktemp("closed") / "originals.json")
    create_locust(admin, spec, changes)
    try:
        workloads.wait_rolled_out(admin, workloads.Workload("Deployment", NAMESPACE, spec.names.master, "locust"), 180)
        url = admin.service_proxy_url(NAMESPACE, spec.names.master, WEB_PORT)
        master = LocustMaster(url, session=admin.client(), token=LOCUST_TOKEN)
        master.wait_for_workers(1, 180)
        yield admin, spec, master
    finally:
        undo(admin, changes, timeout_s=120)


def _requests(master: LocustMaster) -> int:
    return int(master.stats()["stats"][-1]["num_requests"])


def _stranger_pod(admin: Cluster, spec: LocustDeployment) -> dict[str, Any]:
    script = STRANGER.format(master=spec.names.master, namespace=NAMESPACE, port=WEB_PORT, gateway=GATEWAY)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stranger"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": spec.image, "imagePullPolicy": "Never", "command": ["python3", "-c", script]}
            ],
        },
    }
    admin.core.create_namespaced_pod("default", pod)
    try:
        phase = until(lambda: admin.core.read_namespaced_pod("stranger", "default").status.phase, 120,
                      "the stranger pod to finish", ready=lambda p: p in ("Succeeded", "Failed"))  # fmt: skip
        log = admin.core.read_namespaced_pod_log("stranger", "default")
        assert phase == "Succeeded", log
        return dict(json.loads(log.strip().splitlines()[-1]))
    finally:
        admin.core.delete_namespaced_pod("stranger", "default", grace_period_seconds=0)


def test_a_pod_in_another_namespace_reads_the_master_but_cannot_start_load(closed):
    admin, spec, master = closed
    seen = _stranger_pod(admin, spec)
    assert seen == {"read": 200, "swarm": 403}, seen  # it reached the master: refused, not unreachable
    assert master.stats()["state"] == "ready" and _requests(master) == 0


def test_the_runs_token_moves_the_load_to_its_target_only(closed):
    _, _, master = closed
    with pytest.raises(LoadGeneratorError, match=f"HTTP 403: refused: .*not to '{FOREIGN}'"):
        master.swarm(1, 1, FOREIGN, OPTIONS)
    with pytest.raises(LoadGeneratorError, match="HTTP 403: refused"):
        master.hold_connections(10, FOREIGN, "external.nginx", refresh_s=20, open_rate=10)
    assert master.stats()["state"] == "ready" and _requests(master) == 0
    master.swarm(1, 1, GATEWAY, OPTIONS)
    try:
        until(lambda: _requests(master), 60, "requests to the gateway")
    finally:
        master.stop()


def _through_port_forward(admin: Cluster, pod: str, request: bytes) -> str:
    """One HTTP exchange with port 8089 of `pod` over the API server's port-forward (what kubectl port-forward
    opens): the status line of the answer."""
    forward = portforward(admin.core.connect_get_namespaced_pod_portforward, pod, NAMESPACE, ports=str(WEB_PORT))
    try:
        sock = forward.socket(WEB_PORT)
        sock.setblocking(True)
        sock.settimeout(10)
        sock.sendall(request)
        answer = b""
        while b"\r\n" not in answer and (chunk := sock.recv(4096)):
            answer += chunk
        sock.close()
        return answer.split(b"\r\n", 1)[0].decode()
    finally:
        forward.close()


def test_a_person_reads_the_web_ui_through_a_port_forward_and_starts_nothing(closed):
    admin, spec, master = closed
    pods = admin.core.list_namespaced_pod(NAMESPACE, label_selector=label_selector(spec.labels(MASTER)))
    [pod] = [p.metadata.name for p in pods.items]
    before = master.stats()["state"]
    read = _through_port_forward(admin, pod, b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    assert read.endswith("200 OK"), read
    body = f"user_count=5&spawn_rate=5&host={GATEWAY}".encode()
    head = "POST /swarm HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    head += f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
    start = head.encode() + body
    refused = _through_port_forward(admin, pod, start)
    assert refused.endswith("403 FORBIDDEN"), refused
    assert master.stats()["state"] == before

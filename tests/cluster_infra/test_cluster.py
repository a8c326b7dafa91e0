"""The one-machine cluster for real: make cluster-up serves the test bed, make cluster-down leaves nothing.

Needs root, the Debian packages (k8s/cluster/deps.sh installs them) and, on a cold cache, about half an
hour of builds. Takes the host's picture before cluster-up and compares it after cluster-down,
independently of the state that down.sh itself records.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from support.cluster import run
from support.project import CACHE, K8S

# make test-all: a second bring-up, from a host with no cluster; the gate's cluster tier brings one up once
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.nightly]

CLUSTER_DIR = CACHE / "cluster"
PROMETHEUS = "http://10.96.0.90:9090"
# Counters that change on their own (the same list as k8s/cluster/down.sh).
VOLATILE = re.compile(
    r"^(fs\.(aio-nr|dentry-state|file-nr|inode-nr|inode-state|quota\.)"
    r"|kernel\.(ns_last_pid|random\.)|net\.netfilter\.nf_conntrack_count)"
)


def host_picture() -> dict[str, object]:
    def lines(cmd: str) -> set[str]:
        return set(subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.splitlines())

    sysctls = {}
    for line in lines("sysctl -a 2>/dev/null"):
        key, _, value = line.partition(" = ")
        if not VOLATILE.match(key):
            sysctls[key] = value
    return {
        "links": lines("ip -o link show | awk -F': ' '{print $2}'"),
        "chains": lines(
            "for t in filter nat mangle raw; do iptables-save -t $t | grep '^:' | "
            "sed \"s/^:/$t /\" | cut -d' ' -f1,2; done"
        ),
        "mounts": lines("awk '{print $5}' /proc/self/mountinfo"),
        "cgroups": lines("ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*/k8s.io 2>/dev/null"),
        "netns": lines("ip netns list 2>/dev/null | awk '{print $1}'"),
        "sysctls": sysctls,
    }


def cluster_processes() -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(CLUSTER_DIR) + "/" in cmd or "/run/gateway-sizer/" in cmd:
            found.append(f"{pid}: {cmd[:120]}")
    return found


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, resp.read()


def prometheus_series(query: str, deadline_s: float = 90) -> list[dict]:
    end = time.monotonic() + deadline_s
    while True:
        _, body = get(f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        result = json.loads(body)["data"]["result"]
        if result or time.monotonic() > end:
            return result
        time.sleep(2)


@pytest.fixture
def fresh_host():
    if os.geteuid() != 0:
        pytest.fail("the one-machine cluster needs root: run the cluster tests as root")
    if (CLUSTER_DIR / "state").exists():
        if os.environ.get("GATEWAY_SIZER_TESTS_STARTED_CLUSTER") != "1":  # set by tests/cluster/conftest.py
            pytest.fail(f"a cluster is already up ({CLUSTER_DIR}): run make cluster-down first")
        run(["make", "-f", str(K8S / "cluster.mk"), "cluster-down"], timeout=600)  # tests/cluster brought it up
    return host_picture()


@pytest.mark.timeout(3600)
def test_cluster_up_serves_the_test_bed_and_cluster_down_leaves_nothing(fresh_host):
    before = fresh_host
    up = run(["make", "-f", str(K8S / "cluster.mk"), "cluster-up"], timeout=3300)
    try:
        kubeconfig = re.search(r"^export KUBECONFIG=(\S+)$", up.stdout, re.M).group(1)
        kubectl = run([str(K8S / "cluster/build.sh"), "--print-path", "kubectl"], timeout=60).stdout.strip()
        pods = json.loads(
            run([kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-A", "-o", "json"], timeout=60).stdout
        )["items"]
        names = {(p["metadata"]["namespace"], p["metadata"]["name"].rsplit("-", 2)[0]) for p in pods}
        assert {
            ("kube-system", "coredns"),
            ("projectcontour", "contour"),
            ("monitoring", "prometheus"),
            ("gateway-loadtest", "nginx"),
        } <= names
        assert any(ns == "projectcontour" and n.startswith("envoy") for ns, n in names)
        for p in pods:
            ready = {c["type"]: c["status"] for c in p["status"].get("conditions", [])}.get("Ready")
            assert p["status"]["phase"] == "Running" and ready == "True", p["metadata"]["name"]

        envoy_ip = run(
            [
                kubectl,
                "--kubeconfig",
                kubeconfig,
                "-n",
                "projectcontour",
                "get",
                "svc",
                "envoy",
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
            timeout=60,
        ).stdout
        status, body = get(f"http://{envoy_ip}/", {"Host": "external.nginx"})
        assert status == 200 and b"nginx" in body

        assert prometheus_series('container_cpu_usage_seconds_total{container="envoy"}'), "no cAdvisor Envoy CPU"
        assert prometheus_series("envoy_http_downstream_rq_total"), "no Envoy request counter"
        # etcd speaks TLS only, and only to a client with a certificate of its own CA (the API server's)
        with pytest.raises((urllib.error.URLError, http.client.HTTPException, OSError)):
            get("http://127.0.0.1:23790/health")
        with pytest.raises((urllib.error.URLError, http.client.HTTPException, OSError)):
            urllib.request.urlopen(
                "https://127.0.0.1:23790/health", timeout=5, context=ssl._create_unverified_context()
            )
    finally:
        down = run(["make", "-f", str(K8S / "cluster.mk"), "cluster-down"], timeout=600)

    assert "cluster down" in down.stderr
    after = host_picture()
    assert cluster_processes() == []
    assert after["links"] == before["links"]
    assert after["chains"] == before["chains"]
    assert after["mounts"] == before["mounts"]
    assert after["cgroups"] == before["cgroups"]
    assert after["netns"] == before["netns"]
    changed = {k: (v, after["sysctls"].get(k)) for k, v in before["sysctls"].items() if after["sysctls"].get(k) != v}
    assert changed == {}
    assert not CLUSTER_DIR.exists()

    again = run([str(K8S / "cluster/down.sh")], timeout=120)
    assert "cluster down" in again.stderr, "down.sh must be idempotent"


@pytest.mark.timeout(1800)
def test_cluster_up_that_fails_says_why_and_tears_down_what_it_started(fresh_host):
    before = fresh_host
    with socket.socket() as squatter:  # etcd's client port taken: etcd exits right after start
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last etcd's TIME_WAIT
        squatter.bind(("127.0.0.1", 23790))
        squatter.listen()
        up = run([str(K8S / "cluster/up.sh")], timeout=1800, check=False)
    assert up.returncode != 0
    assert up.stdout == ""
    assert "error: etcd exited while waiting for etcd health" in up.stderr
    assert "tearing down what it started" in up.stderr
    after = host_picture()
    assert cluster_processes() == []
    for what in ("links", "chains", "mounts", "cgroups", "netns", "sysctls"):
        assert after[what] == before[what], what
    assert not CLUSTER_DIR.exists()

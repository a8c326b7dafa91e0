"""The local test bed with real Envoy, nginx, Locust and Prometheus processes on loopback."""

from __future__ import annotations

import math
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from runner.locust import REPORT_LAG_S, LocustOptions, loop_backend
from runner.metrics import Metrics
from runner.paths import PROJECT_ROOT
from runner.platforms.local.envoy import CLUSTER_NAME
from runner.platforms.local.layout import WORKER_POD
from runner.platforms.local.testbed import SELECTORS, LocustSetup
from support.wait import until

LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"
WINDOW_S = 4  # the load's window read back from Prometheus
MIN_SAMPLES = 3  # of each CPU counter in it (scraped every second)
LATER_S = 2.5  # after the moment a second's counts are complete: more than two worker report intervals


def _exported(testbed) -> dict[tuple[str, str], dict[str, float]]:
    text = requests.get(f"http://127.0.0.1:{testbed.ports.exporter}/metrics", timeout=5).text
    found: dict[tuple[str, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "pod" in sample.labels:
                found.setdefault((sample.name, sample.labels["pod"]), sample.labels | {"value": sample.value})
    return found


def test_gateway_routes_on_the_host_header_round_robin_to_every_replica(testbed_factory):
    testbed = testbed_factory()
    testbed.start_monitoring()
    testbed.scale_backend(2)
    testbed.start_envoy(0.5, 256 * 2**20, 1)
    session = requests.Session()
    for _ in range(20):
        response = session.get(testbed.gateway_url + "/", headers={"Host": "external.nginx"}, timeout=5)
        assert response.status_code == 200 and "Welcome to nginx!" in response.text
    assert session.get(testbed.gateway_url + "/", headers={"Host": "other.host"}, timeout=5).status_code == 404
    gzipped = session.get(testbed.gateway_url + "/", headers={"Host": "external.nginx", "Accept-Encoding": "gzip"})
    assert gzipped.headers.get("Content-Encoding") == "gzip"  # Contour's compressor filter, as in a cluster
    assert "x-request-id" not in {k.lower() for k in gzipped.request.headers}
    clusters = requests.get(f"http://127.0.0.1:{testbed.ports.envoy_admin}/clusters", timeout=5).text
    per_host = [line for line in clusters.splitlines() if line.startswith(CLUSTER_NAME) and "::rq_total::" in line]
    assert len(per_host) == 2 and all(int(line.rsplit("::", 1)[1]) > 0 for line in per_host), per_host


def test_envoy_limits_are_a_cgroup_quota_and_published_under_cadvisor_names(testbed_factory):
    testbed = testbed_factory()
    testbed.start_monitoring()
    testbed.scale_backend(1, cpu_cores=0.5)
    testbed.start_envoy(0.15, 256 * 2**20, 1)
    envoy = testbed.containers["envoy-local"].cgroup
    assert envoy.cpu_quota() == (15000, 100000)
    assert envoy.memory_limit_bytes() == 256 * 2**20
    exported = _exported(testbed)
    assert exported[("container_spec_cpu_quota", "envoy-local")]["value"] == 15000
    assert exported[("container_spec_cpu_period", "envoy-local")]["value"] == 100000
    assert exported[("container_cpu_usage_seconds_total", "envoy-local")]["namespace"] == "projectcontour"
    assert exported[("container_spec_cpu_quota", "nginx-0")]["value"] == 50000
    assert exported[("container_memory_working_set_bytes", "envoy-local")]["value"] > 1e6


def test_new_limits_are_written_in_place_and_a_new_bootstrap_or_a_fresh_start_replaces_the_process(testbed_factory):
    testbed = testbed_factory()
    testbed.scale_backend(1)
    testbed.start_envoy(0.2, 256 * 2**20, 1)
    envoy = testbed.containers["envoy-local"]
    first = envoy.process.pid
    testbed.start_envoy(0.4, 512 * 2**20, 1)  # as an in-place resize: the same process, new limits
    assert envoy.process.pid == first and envoy.cgroup.cpu_quota() == (40000, 100000)
    assert envoy.cgroup.memory_limit_bytes() == 512 * 2**20
    assert requests.get(testbed.gateway_url, headers={"Host": "external.nginx"}, timeout=5).ok
    testbed.start_envoy(0.4, 512 * 2**20, 2)  # another worker count: another process, as a rollout
    second = testbed.containers["envoy-local"].process.pid
    assert second != first
    testbed.start_envoy(0.4, 512 * 2**20, 2, fresh=True)  # the memory model's fresh Envoy per point
    assert testbed.containers["envoy-local"].process.pid not in (first, second)
    assert testbed.containers["envoy-local"].cgroup.cpu_quota() == (40000, 100000)
    assert requests.get(testbed.gateway_url, headers={"Host": "external.nginx"}, timeout=5).ok


@pytest.mark.slow
@pytest.mark.nightly  # a rate within a band and Locust's report lag timed: the gate's sweeps read both sides anyway
def test_locust_load_reaches_prometheus_on_both_sides(testbed_factory):
    testbed = testbed_factory()
    testbed.start_monitoring()
    testbed.scale_backend(1)
    testbed.start_envoy(0.5, None, 1)
    options = LocustOptions("external.nginx", "/", user_rps=20)
    locust = testbed.start_locust(LocustSetup(LOCUSTFILE, "FastGatewayUser", options, workers=2))
    locust.swarm(10, 100, testbed.gateway_url, options)
    until(locust.stats, 30, "Locust's 2 workers running the 10 users",
          ready=lambda stats: stats["worker_count"] == 2 and stats["user_count"] == 10)  # fmt: skip
    start = math.ceil(time.time())  # a window with the whole load on
    end = start + WINDOW_S
    metrics = Metrics(testbed.prometheus_url)

    def scraped() -> bool:
        """Prometheus holds the window: Envoy's and Locust's CPU counters and Envoy's requests, sampled in it."""
        return (time.time() > end and metrics.cpu_samples(SELECTORS.envoy, start, end) >= MIN_SAMPLES
                and metrics.cpu_samples(SELECTORS.generator, start, end) >= MIN_SAMPLES
                and not math.isnan(metrics.envoy_rps(SELECTORS.envoy, start, end)))  # fmt: skip

    until(scraped, 30, f"Prometheus to hold the {WINDOW_S} s window from {start} of both sides' samples")
    snapshot = locust.snapshot()
    assert sum(n for second, n in snapshot.requests_per_second.items() if start <= second < end) > 0
    # each worker runs on the loop and send timer the runner chose for it, and says so in its log
    backend = loop_backend()
    assert backend is not None
    for index in range(2):
        log = (testbed.supervisor.log_dir / f"{WORKER_POD}-{index}.log").read_text()
        assert f"gevent loop backend {backend}, send timer fine" in log, log[-2000:]
    assert 100 < metrics.envoy_rps(SELECTORS.envoy, start, end) < 300  # 10 users x 20 RPS
    assert metrics.cpu_cores(SELECTORS.envoy, start, end).mean > 0
    assert metrics.cpu_cores(SELECTORS.generator, start, end).mean > 0
    # a second's counts are all on the master REPORT_LAG_S after it ends (what a window waits for): every
    # worker has reported since; with Locust's own 3 s report interval they would still grow after that.
    # These sleeps are the claim itself, not a wait for an event: look at exactly that moment for three seconds in a
    # row, each as it comes, and again LATER_S after the last of them (longer after the others)
    first = int(time.time())
    early: dict[int, int] = {}
    for second in range(first, first + 3):
        time.sleep(max(0.0, second + 1 + REPORT_LAG_S - time.time()))  # a snapshot takes milliseconds
        early[second] = locust.snapshot().requests_per_second.get(second, 0)
    time.sleep(LATER_S)
    late = {second: n for second, n in locust.snapshot().requests_per_second.items() if second in early}
    assert all(n > 0 for n in early.values()) and early == late, (early, late)
    locust.stop()

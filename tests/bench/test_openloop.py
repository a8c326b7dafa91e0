"""The open-loop generator (bench/openloop/): refusals, bounds, framing, arrivals, cgroup reading, real rates."""

from __future__ import annotations

import contextlib
import itertools
import math
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.project import bench_module

openloop = bench_module("openloop")  # bench/openloop.py, loaded from its file (bench/ stays off the path)


@pytest.fixture(scope="module")
def binary() -> Path:
    return openloop.build()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def refused(binary: Path, *args: str) -> str:
    """Runs the generator expecting a refusal: exit 2, nothing on stdout, one line on stderr."""
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("openloop: "), done.stderr
    return lines[0]


VALID = ["--rate", "10", "--duration", "1", "--arrivals", "uniform"]


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.1:80", "http://8.8.8.8", "http://0.0.0.0:80", "http://[::2]:80", "http://localhost:80",
     "http://example.com", "https://127.0.0.1:443", "127.0.0.1:80", "http://127.0.0.1:80/index.html"],
)  # fmt: skip
def test_refuses_targets_that_are_not_a_loopback_ip(binary, url):
    refused(binary, "--url", url, *VALID)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rate", "0"], "--rate"),
        (["--rate", "100001"], "--rate"),
        (["--rate", "nan"], "--rate"),
        (["--duration", "0"], "--duration"),
        (["--duration", "601"], "--duration"),
        (["--warmup", "61"], "--warmup"),
        (["--timeout", "0"], "--timeout"),
        (["--connections", "0"], "--connections"),
        (["--connections", "10001"], "--connections"),
        (["--arrivals", "bursty"], "--arrivals"),
        (["--burst", "5"], "--burst"),  # uniform has no bursts
        (["--http", "h2"], "--http"),
        (["--limit-cores", "0.5"], "--limit-cores needs --cgroup"),
        (["--cgroup", "/nonexistent"], "/nonexistent"),
        (["--seed", "7"], "--seed"),
        (["--path", "no-slash"], "--path"),
        (["--nonsense"], "nonsense"),
    ],
)
def test_refuses_out_of_bound_or_unknown_flags_with_one_line(binary, args, says):
    # later flags win: VALID first, then the bad value
    line = refused(binary, "--url", "http://127.0.0.1:9", *VALID, *args)
    assert says in line


@pytest.mark.parametrize("missing", ["--url", "--rate", "--duration", "--arrivals"])
def test_requires_url_rate_duration_and_arrivals(binary, missing):
    args = dict(zip(["--url", *VALID[::2]], ["http://127.0.0.1:9", *VALID[1::2]], strict=True))
    del args[missing]
    assert f"{missing} is required" in refused(binary, *itertools.chain.from_iterable(args.items()))


def test_accepts_loopback_addresses_and_counts_refused_connections_as_errors(binary):
    for host in ("127.0.0.1", "127.1.2.3"):
        result = openloop.run(f"http://{host}:{closed_port()}", 50, 0.4, "uniform", warmup=0.1)
        assert result["scheduled"] == 20 and result["errors"] == 20 and result["failed"] == 20
        assert result["completed"] == 0 and result["achieved_rps"] == 0 and result["cpu"] is None
        assert "refused" in result["error_sample"]


# -- against a small HTTP/1.1 server in this process ---------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    seen: list[tuple[str, str | None, str | None]]  # path, Host, Accept-Encoding
    mode = "length"
    delay_s = 0.0
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.seen.append((self.path, self.headers.get("Host"), self.headers.get("Accept-Encoding")))
        if self.delay_s:
            time.sleep(self.delay_s)
        body = b"x" * 615
        if self.mode == "status503":
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.mode == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (body[:100], body[100:]):
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\nX-Trailer: 1\r\n\r\n")
        elif self.mode == "close":  # no length: the body ends when the connection closes
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def server(mode: str = "length", delay_s: float = 0.0) -> Iterator[tuple[str, list]]:
    seen: list = []
    handler = type("H", (Handler,), {"mode": mode, "delay_s": delay_s, "seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("http", ["raw", "nethttp"])
@pytest.mark.parametrize("mode", ["length", "chunked", "close", "status503"])
def test_reads_every_response_framing_and_sends_the_configured_request(binary, http, mode):
    with server(mode) as (url, seen):
        result = openloop.run(url, 100, 0.5, "uniform", warmup=0.2, http=http, path="/p?q=1", host="gw.example",
                              accept_encoding="identity")  # fmt: skip
    assert result["scheduled"] == result["sent"] == result["completed"] == 50, result
    assert result["errors"] == 0 and result["unfinished"] == 0
    if mode == "status503":
        assert result["non_2xx"] == 50 and result["ok"] == 0 and result["failed"] == 50
    else:
        assert result["ok"] == 50 and result["failed"] == 0
    assert set(seen) == {("/p?q=1", "gw.example", "identity")}
    if mode == "close":
        assert result["connections"]["opened"] >= 70  # a new connection per request (warm-up included)
    else:
        assert result["connections"]["opened"] == result["connections"]["used"] <= 64


def test_default_request_headers(binary):
    with server() as (url, seen):
        openloop.run(url, 20, 0.2, "uniform", warmup=0)
    assert set(seen) == {("/", "external.nginx", "gzip, deflate, br")}


def test_open_loop_past_the_connection_bound_waits_count_in_latency(binary):
    """2 connections, 50 ms per answer: 40/s served of 100/s offered; latency from intended times grows."""
    with server(delay_s=0.05) as (url, _):
        result = openloop.run(url, 100, 1, "uniform", warmup=0, connections=2, timeout=5)
    assert result["connections"] == {"bound": 2, "used": 2, "opened": 2}
    assert result["scheduled"] == result["completed"] == 100  # the backlog is served after the window
    assert 30 <= result["achieved_rps"] <= 45  # answers inside the window
    # the last arrival (at 0.99 s) waits for the ~98 before it: answered near 2.5 s
    assert result["latency_ms"]["max"] > 1200 and result["latency_ms"]["p50"] > 400
    assert result["late_starts"] > 80 and result["start_delay_ms"]["max"] > 1000


def test_a_backlog_left_at_the_end_is_unfinished(binary):
    with server(delay_s=0.2) as (url, _):
        result = openloop.run(url, 50, 1, "uniform", warmup=0, connections=1, timeout=0.5)
    # one connection, 5 answers/s: about 5 answered in the window, ~2 more in the drain, the rest dropped
    assert result["completed"] < 15 and result["unfinished"] > 30
    assert result["failed"] == result["unfinished"] + result["errors"] + result["non_2xx"]
    assert result["scheduled"] == result["completed"] + result["errors"] + result["unfinished"]


# -- arrivals, from the intended send times the generator dumps ------------------------------------------
def intended(binary, tmp_path, arrivals: str, rate: float, seconds: float, **options) -> list[int]:
    dump = tmp_path / f"{arrivals}.txt"
    openloop.run(f"http://127.0.0.1:{closed_port()}", rate, seconds, arrivals, warmup=0, dump_intended=dump,
                 **options)  # fmt: skip
    return [int(line) for line in dump.read_text().split()]


def test_poisson_gaps_are_exponential(binary, tmp_path):
    rate = 2000
    times = intended(binary, tmp_path, "poisson", rate, 2, seed=12345)
    gaps = sorted((b - a) / 1e9 for a, b in itertools.pairwise(times))
    assert abs(len(times) - 4000) < 4 * math.sqrt(4000)
    mean = statistics.fmean(gaps)
    assert abs(mean * rate - 1) < 0.05
    assert abs(statistics.pstdev(gaps) / mean - 1) < 0.05  # coefficient of variation 1
    n = len(gaps)
    distance = max(max((i + 1) / n - (1 - math.exp(-rate * g)), (1 - math.exp(-rate * g)) - i / n)
                   for i, g in enumerate(gaps))  # fmt: skip
    assert distance < 1.63 / math.sqrt(n)  # Kolmogorov-Smirnov at the 1% level


def test_poisson_seed_reproduces_the_schedule(binary, tmp_path):
    first = intended(binary, tmp_path, "poisson", 500, 0.3, seed=7)
    assert first == intended(binary, tmp_path, "poisson", 500, 0.3, seed=7)
    assert first != intended(binary, tmp_path, "poisson", 500, 0.3, seed=8)


def test_uniform_gaps_are_constant(binary, tmp_path):
    times = intended(binary, tmp_path, "uniform", 1000, 0.5)
    assert len(times) == 500
    assert {b - a for a, b in itertools.pairwise(times)} <= {999_999, 1_000_000, 1_000_001}


def test_synchronized_fires_bursts_on_shared_ticks(binary, tmp_path):
    times = intended(binary, tmp_path, "synchronized", 1000, 0.5, burst=10)
    ticks = [list(group) for _, group in itertools.groupby(times)]
    assert len(times) == 500 and len(ticks) == 50 and {len(t) for t in ticks} == {10}
    assert {b[0] - a[0] for a, b in itertools.pairwise(ticks)} <= {9_999_999, 10_000_000, 10_000_001}
    # default burst: the sweeps' 20 RPS per paced user, ceil(rate / 20) requests per tick
    assert len(list(itertools.groupby(intended(binary, tmp_path, "synchronized", 1000, 0.2)))) == 4


def test_clustered_sends_poisson_clusters_of_geometric_size(binary, tmp_path):
    rate, mean = 2000, 2.0
    times = intended(binary, tmp_path, "clustered", rate, 2, cluster_mean=mean, seed=12345)
    clusters = [len(list(group)) for _, group in itertools.groupby(times)]
    assert abs(len(times) - rate * 2) < 5 * math.sqrt(rate * 2 * (2 * mean - 1))  # variance n * E[K^2] / E[K]
    assert abs(statistics.fmean(clusters) / mean - 1) < 0.1
    assert abs(clusters.count(1) / len(clusters) - 1 / mean) < 0.05  # geometric: size 1 with probability 1/mean
    starts = sorted(set(times))
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(starts)]
    assert abs(statistics.fmean(gaps) * rate / mean - 1) < 0.1  # clusters at rate / mean
    assert abs(statistics.pstdev(gaps) / statistics.fmean(gaps) - 1) < 0.1  # exponential gaps between clusters


@pytest.mark.parametrize(
    ("args", "says"),
    [([], "--cluster-mean"), (["--cluster-mean", "0.5"], "--cluster-mean"), (["--burst", "2"], "--burst")],
)
def test_clustered_needs_a_mean_of_one_or_more_and_no_burst(binary, args, says):
    assert says in refused(binary, "--url", "http://127.0.0.1:80", *VALID, "--arrivals", "clustered", *args)


def test_cluster_mean_applies_to_clustered_only(binary):
    assert "--cluster-mean" in refused(binary, "--url", "http://127.0.0.1:80", *VALID, "--cluster-mean", "2")


# -- cgroup reading, from fake cgroup folders --------------------------------------------------------------
def test_reads_a_cgroup_v1_cpuacct_folder_and_derives_its_cpu_folder(binary, tmp_path):
    cpuacct, cpu = tmp_path / "cpuacct" / "pod", tmp_path / "cpu" / "pod"
    cpuacct.mkdir(parents=True)
    cpu.mkdir(parents=True)
    (cpuacct / "cpuacct.usage").write_text("123456789\n")
    (cpu / "cpu.stat").write_text("nr_periods 40\nnr_throttled 3\nthrottled_time 5000000\n")
    (cpu / "cpu.cfs_quota_us").write_text("30000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    result = openloop.run(f"http://127.0.0.1:{closed_port()}", 10, 0.3, "uniform", cgroup=cpuacct, warmup=0,
                          limit_cores=0.3)  # fmt: skip
    found = result["cpu"]
    assert found["cgroup_version"] == 1 and found["cpu_cgroup"] == str(cpu) and found["quota_cores"] == 0.3
    assert found["cores"] == 0 and found["usage_start_us"] == 123456.8 and found["nr_periods"] == 0
    assert found["throttled_ms"] == 0 and found["us_per_request"] is None and result["utilization"] == 0
    assert len(found["samples"]) == 1 and found["samples"][0]["t_s"] == pytest.approx(0.3, abs=0.01)
    assert "cpu.stat" in refused(binary, "--url", "http://127.0.0.1:9", *VALID, "--cgroup", str(cpuacct),
                                 "--cpu-cgroup", str(tmp_path))  # fmt: skip


def test_reads_a_cgroup_v2_folder(binary, tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 5000\nuser_usec 4000\nnr_periods 7\nnr_throttled 1\n")
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    result = openloop.run(f"http://127.0.0.1:{closed_port()}", 10, 1.2, "uniform", cgroup=tmp_path, warmup=0)
    found = result["cpu"]
    assert found["cgroup_version"] == 2 and found["quota_cores"] == 0.5 and found["usage_end_us"] == 5000
    assert [s["t_s"] for s in found["samples"]] == pytest.approx([1.0, 1.2], abs=0.01)
    (tmp_path / "cpu.stat").write_text("nr_periods 7\n")
    assert "usage_usec" in refused(binary, "--url", "http://127.0.0.1:9", *VALID, "--cgroup", str(tmp_path))


# -- real nginx and Envoy ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.nightly  # a rate within 1%: a measurement of the bench's generator (bench/openloop_check.py)
@pytest.mark.parametrize("arrivals", ["uniform", "poisson", "synchronized"])
def test_rate_accuracy_against_a_real_nginx(binary, testbed_factory, arrivals):
    testbed = testbed_factory()
    testbed.scale_backend(1)
    rate, seconds = 1000, 3
    result = openloop.run(testbed.backend_url(), rate, seconds, arrivals, warmup=1)
    assert result["failed"] == 0 and result["completed"] == result["scheduled"]
    assert abs(result["achieved_rps"] / result["scheduled_rps"] - 1) < 0.01
    if arrivals == "poisson":  # the number of arrivals of a Poisson process varies by sqrt(n)
        assert abs(result["scheduled"] - rate * seconds) < 4 * math.sqrt(rate * seconds)
    else:
        assert result["scheduled"] == rate * seconds
        assert abs(result["achieved_rps"] / rate - 1) < 0.01


@pytest.mark.slow
@pytest.mark.nightly  # CPU per request against a quota: a measurement of the bench's generator and meter
def test_envoy_cpu_matches_its_cgroup_counter(binary, testbed_factory):
    testbed = testbed_factory()
    testbed.scale_backend(1)
    testbed.start_envoy(0.5, 256 * 2**20, 1)
    group = testbed.containers["envoy-local"].cgroup
    folder = group.usage_folder
    before = group.cpu_usage_seconds()
    result = openloop.run(testbed.gateway_url, 500, 2, "synchronized", cgroup=folder, limit_cores=0.5, warmup=1)
    after = group.cpu_usage_seconds()
    found = result["cpu"]
    assert result["failed"] == 0 and result["achieved_rps"] == pytest.approx(500, rel=0.01)
    rounding_us = 1  # the binary prints microseconds rounded to a tenth; the counter reads in nanoseconds
    assert before * 1e6 - rounding_us <= found["usage_start_us"] <= found["usage_end_us"] <= after * 1e6 + rounding_us
    assert found["quota_cores"] == 0.5 and result["utilization"] == pytest.approx(found["cores"] / 0.5, abs=1e-3)
    assert 0.01 < found["cores"] < 0.55 and 100 < found["us_per_request"] < 1000
    assert found["nr_periods"] >= 15  # a 100 ms CFS period over a 2 s window
    assert statistics.fmean(s["cores"] for s in found["samples"]) == pytest.approx(found["cores"], rel=0.01)

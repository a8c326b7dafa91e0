"""A real Prometheus scraping a synthetic exporter that stands in for cAdvisor and Envoy, for the tests against a
real API server (no kubelet runs there, so no pod of theirs has a cAdvisor or an Envoy): the series are named and
labelled as the kubelet's cAdvisor and Envoy's /stats/prometheus give them (with the pod's namespace, pod and
container labels, honored by the scrape), each counter growing at the rate the test gives."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from runner.platforms.local.binaries import prometheus
from runner.platforms.local.processes import free_port
from support.wait import until


@dataclass(frozen=True)
class Counter:
    """One counter series: its name, labels and how much it grows per second, or (`read`) what something counts
    (None: not published yet, as Envoy scraped with `usedonly` leaves out a counter that never moved)."""

    name: str
    labels: dict[str, str]
    per_second: float = 0.0
    read: Callable[[], float | None] | None = None


def envoy_pod(namespace: str, pod: str, *, rps: float, cores: float, counted: bool = True) -> list[Counter]:
    """What cAdvisor and Envoy publish for an Envoy pod serving `rps` at `cores` (`counted`: Envoy's request
    counter among them)."""
    container = {"namespace": namespace, "pod": pod, "container": "envoy"}
    series = [
        Counter("container_cpu_usage_seconds_total", container, cores),
        Counter("container_cpu_cfs_periods_total", container, 10.0),
        Counter("container_cpu_cfs_throttled_periods_total", container, 0.0),
    ]
    if counted:
        listener = {"namespace": namespace, "pod": pod, "envoy_http_conn_manager_prefix": "ingress_http"}
        series.append(Counter("envoy_http_downstream_rq_total", listener, rps))
    return series


def _exposition(series: list[Counter], started: float) -> bytes:
    elapsed = time.time() - started
    lines = []
    for counter in series:
        value = counter.read() if counter.read else 1 + counter.per_second * elapsed
        if value is not None:
            labels = ",".join(f'{k}="{v}"' for k, v in counter.labels.items())
            lines.append(f"{counter.name}{{{labels}}} {value:.6f}")
    return ("\n".join(lines) + "\n").encode()


@contextlib.contextmanager
def synthetic_prometheus(folder: Path, series: list[Counter]) -> Iterator[str]:
    """A Prometheus scraping the synthetic exporter every second; yields its URL once it holds 4 samples of each
    series."""
    started = time.time()

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = _exposition(series, started)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    exporter = ThreadingHTTPServer(("127.0.0.1", free_port()), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": "synthetic",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{exporter.server_port}"]}],
            }
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    process = subprocess.Popen(
        [
            str(prometheus()),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def samples() -> int:
        query = urllib.parse.quote(f"count_over_time({series[0].name}[1m])")
        try:
            with urllib.request.urlopen(f"{url}/api/v1/query?query={query}", timeout=2) as answer:
                result = json.loads(answer.read())["data"]["result"]
        except OSError:
            return 0
        return int(float(result[0]["value"][1])) if result else 0

    try:
        until(lambda: samples() >= 4, 30, "the synthetic Prometheus holds 4 samples", poll_s=0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        exporter.shutdown()

"""Credentials in a prometheus.url reach Prometheus and nothing else: not messages, not the run directory."""

from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
import yaml

from runner.errors import UnreachableError
from runner.http import is_redacted, redact_url, split_credentials
from runner.metrics import Metrics
from runner.results import RunStore
from runner.scenario import parse_scenario

SECRET_URL = "http://gauge:s3cr%40t@prometheus.example:9090/prefix"


def test_redact_url_removes_user_and_password():
    assert redact_url(SECRET_URL) == "http://REDACTED@prometheus.example:9090/prefix"
    assert redact_url("https://token@host/") == "https://REDACTED@host/"
    assert redact_url("http://prometheus:9090") == "http://prometheus:9090"
    assert is_redacted(redact_url(SECRET_URL)) and not is_redacted(SECRET_URL)


def test_split_credentials_unquotes_them():
    assert split_credentials(SECRET_URL) == ("http://prometheus.example:9090/prefix", ("gauge", "s3cr@t"))
    assert split_credentials("http://h:1/") == ("http://h:1/", None)


def test_the_run_directory_keeps_no_credentials(tmp_path):
    scenario = parse_scenario(
        {"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]}, "prometheus": {"url": SECRET_URL}}
    )
    store = RunStore.create(scenario, tmp_path)
    saved = (store.run_dir / "scenario.yaml").read_text()
    assert "s3cr" not in saved and "gauge" not in saved
    assert yaml.safe_load(saved)["prometheus"]["url"] == "http://REDACTED@prometheus.example:9090/prefix"
    assert "s3cr" not in (store.run_dir / "summary.json").read_text()


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(self.headers.get("Authorization"))
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b'{"status": "error", "error": "boom"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus_stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_metrics_send_the_credentials_and_name_the_url_without_them(prometheus_stub):
    _Recorder.seen.clear()
    metrics = Metrics(f"http://gauge:s3cr%40t@127.0.0.1:{prometheus_stub}")
    with pytest.raises(UnreachableError) as error:
        metrics.check()
    assert _Recorder.seen[0] == "Basic " + base64.b64encode(b"gauge:s3cr@t").decode()
    assert metrics.url == f"http://127.0.0.1:{prometheus_stub}"
    assert "s3cr" not in error.value.one_line() and "gauge" not in error.value.one_line()
    assert f"Prometheus at http://127.0.0.1:{prometheus_stub} answered HTTP 500" in error.value.one_line()

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runner.errors import UnreachableError
from runner.metrics import Metrics, Selector, counter_window


def test_counter_window_is_exact_from_first_to_last_sample_with_irregular_stamps():
    # a saturated 150m Envoy as a kubelet's cAdvisor stamped it: 0.15 cores, samples 1.4-3 s apart
    times = [0.0, 2.8, 4.24, 6.1, 7.54, 9.36]
    samples = [(t, 2.0 + 0.15 * t) for t in times]
    stats = counter_window(samples, sub_s=5.0)
    assert stats.mean == pytest.approx(0.15)
    assert stats.min == pytest.approx(0.15) and stats.max == pytest.approx(0.15)


def test_counter_window_range_comes_from_spans_of_the_sub_window():
    samples = [(0, 0.0), (1, 0.5), (2, 1.0), (3, 1.2), (4, 1.4), (5, 1.6), (6, 2.5), (7, 3.4)]
    stats = counter_window(samples, sub_s=2.0)
    assert stats.mean == pytest.approx(3.4 / 7)
    assert stats.min == pytest.approx(0.2)  # 2 s from t=2 to t=4
    assert stats.max == pytest.approx(0.9)  # 2 s from t=5 to t=7


def test_counter_window_drops_what_came_before_a_restart_and_needs_two_samples():
    assert counter_window([(0, 10.0), (1, 11.0), (2, 0.5), (4, 1.5)], 1.0).mean == pytest.approx(0.5)
    assert counter_window([(3, 1.0)], 1.0) is None


def test_selector_matchers():
    selector = Selector("projectcontour", "envoy-.*", "envoy")
    assert selector.matchers() == 'namespace="projectcontour",pod=~"envoy-.*",container="envoy"'
    assert selector.matchers(with_container=False) == 'namespace="projectcontour",pod=~"envoy-.*"'


@contextmanager
def _answering(status: int, body: bytes) -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on loopback answering every GET with `status` and `body`: (its URL, paths asked)."""
    asked: list[str] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()


@pytest.mark.parametrize(("status", "body"), [(503, b"<html>upstream down</html>"), (200, b"not json")])
def test_an_answer_that_is_not_prometheus_json_names_the_http_status(status: int, body: bytes):
    with _answering(status, body) as (url, _):
        metrics = Metrics(url)
        metrics._client.budget_s = 0.5 if status == 503 else metrics._client.budget_s  # retried 503s: keep it short
        with pytest.raises(UnreachableError) as raised:
            metrics.check()
    assert str(raised.value).startswith(f"Prometheus at {url} answered HTTP {status}"), str(raised.value)


def test_the_same_query_at_the_same_time_is_asked_once():
    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    with _answering(200, empty) as (url, asked):
        metrics = Metrics(url)
        metrics._query("up", 100.0)
        metrics._query("up", 100.0)
        metrics._query("up", 101.0)
    assert len(asked) == 2, asked

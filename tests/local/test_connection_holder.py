"""The Locust master's connection holder and route probe, against real Envoy, nginx and Locust processes."""

from __future__ import annotations

import socket
import time

import pytest
import requests

from runner.errors import LoadGeneratorError
from runner.locust import HeldConnections, LocustMaster, LocustOptions
from runner.paths import PROJECT_ROOT
from runner.platforms.local.envoy import EXTRA_ROUTE_HOST
from runner.platforms.local.processes import free_port
from runner.platforms.local.testbed import LocalTestbed, LocustSetup
from support.wait import until

LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"
HOST = "external.nginx"
ENVOY_MEMORY = 512 * 2**20
IDLE_S = 6.0  # Envoy's idle timeout in the refresh test; the holder refreshes every IDLE_S / REFRESHES_PER_IDLE
REFRESHES_PER_IDLE = 3


def _up(testbed_factory, **envoy: object) -> tuple[LocalTestbed, LocustMaster]:
    testbed = testbed_factory()
    testbed.scale_backend(1)
    testbed.start_envoy(0.5, ENVOY_MEMORY, 1, **envoy)
    master = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", LocustOptions(HOST, "/"), workers=1))
    return testbed, master


def _stat(testbed: LocalTestbed, name: str) -> int:
    text = requests.get(f"http://127.0.0.1:{testbed.ports.envoy_admin}/stats", params={"filter": f"^{name}$"}).text
    values = [int(line.split(":")[1]) for line in text.splitlines() if line.split(":")[0] == name]
    assert len(values) == 1, text
    return values[0]


def _settled(master: LocustMaster, timeout_s: float = 60.0) -> HeldConnections:
    return until(master.connections, timeout_s, "the holder to settle", ready=lambda held: held.settled)


def _closed_by_envoy(sock: socket.socket) -> bool:
    """The gateway has closed this connection: a read would return end of file (looked at without blocking)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_holds_connections_each_after_one_answered_request_then_releases_them(testbed_factory):
    testbed, master = _up(testbed_factory)
    requests_before = _stat(testbed, "http.ingress_http.downstream_rq_2xx")
    master.hold_connections(3000, testbed.gateway_url, HOST, refresh_s=50, open_rate=3000)
    held = _settled(master)
    assert (held.held, held.opened, held.failed, held.closed_by_peer, held.non_2xx) == (3000, 3000, 0, 0, 0), held
    assert _stat(testbed, "http.ingress_http.downstream_cx_active") >= 3000
    assert _stat(testbed, "http.ingress_http.downstream_rq_2xx") - requests_before >= 3000
    master.release_connections()
    released = master.connections()
    assert released.state == "released" and released.held == 0
    until(lambda: _stat(testbed, "http.ingress_http.downstream_cx_active") < 10, 10, "Envoy to drop the connections")


def _read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length body: a single recv may stop after the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    assert len(body) == length, "more bytes than the body"
    return data


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_refreshes_keep_held_connections_open_past_envoys_idle_timeout(testbed_factory):
    # Envoy closes idle connections after 6 s here instead of Contour's 60 s: the same race, a tenth the time
    testbed, master = _up(testbed_factory, idle_timeout_s=IDLE_S)
    master.hold_connections(300, testbed.gateway_url, HOST, refresh_s=IDLE_S / REFRESHES_PER_IDLE, open_rate=1000)
    assert _settled(master).held == 300
    idle = []  # the same connection without refreshes: Envoy closes it after its idle timeout
    opened = time.monotonic()
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", testbed.ports.gateway), timeout=5)
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\nAccept-Encoding: identity\r\n\r\n".encode())
        assert _read_response(sock).startswith(b"HTTP/1.1 200")
        idle.append(sock)
    # Envoy closes an HTTP/1.1 connection ~6 s past its idle timeout (drain, delayed close); the held ones, older,
    # would have been closed before these had their refreshes not kept them busy
    until(lambda: all(_closed_by_envoy(sock) for sock in idle), IDLE_S + 30, "Envoy to close the 5 idle connections")
    closed_after = time.monotonic() - opened
    held = master.connections()
    assert closed_after >= IDLE_S, f"Envoy closed the idle connections {closed_after:.1f} s after they opened"
    assert held.held == 300 and held.closed_by_peer == 0, held
    # IDLE_S or more at one request every IDLE_S / 3 each (6 s at one per 2 s): three or more apiece; asks two
    assert held.refreshed >= 300 * (REFRESHES_PER_IDLE - 1), held
    for sock in idle:
        sock.close()


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_the_dead_mans_switch_releases_held_connections(testbed_factory):
    testbed, master = _up(testbed_factory)
    master.heartbeat(2.0, {"run_id": "switch-test"})
    master.hold_connections(500, testbed.gateway_url, HOST, refresh_s=20, open_rate=1000)
    assert _settled(master).held == 500
    until(lambda: master.connections().state == "released", 10, "the switch to release the held connections")
    assert master.connections().held == 0
    until(lambda: _stat(testbed, "http.ingress_http.downstream_cx_active") < 10, 10, "Envoy to drop them")
    state = requests.get(f"{testbed.locust_url}/gateway-sizer/state", timeout=5).json()
    assert state["tripped"] >= 1


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_the_holder_refuses_what_it_cannot_hold_and_counts_failed_connections(testbed_factory):
    testbed, master = _up(testbed_factory)
    url = testbed.gateway_url
    for count, kwargs, message in (
        (70_000, {}, "count: a whole number from 0 to 60000"),
        (59_000, {}, "ephemeral ports"),
        (10, {"refresh_s": 100}, "refresh_s: a number from 1 to 55"),
        (10, {"open_rate": 0.5}, "open_rate: a number from 1 to 10000"),
    ):
        with pytest.raises(LoadGeneratorError, match=message):
            master.hold_connections(count, url, HOST, **{"refresh_s": 20, "open_rate": 100, **kwargs})
    with pytest.raises(LoadGeneratorError, match="refused: this Locust sends load only to its gateway-sizer run"):
        master.hold_connections(40, f"http://127.0.0.1:{free_port()}", HOST, refresh_s=20, open_rate=1000)
    testbed.scale_backend(0)  # nothing listens at the backend's address now, one of the run's targets
    master.hold_connections(40, testbed.backend_url(0), HOST, refresh_s=20, open_rate=1000)
    refused = _settled(master)
    assert (refused.held, refused.opened, refused.failed) == (0, 0, 40), refused
    assert "ConnectionRefusedError" in (refused.last_error or ""), refused


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_the_probe_reports_when_a_route_first_answers(testbed_factory):
    testbed, master = _up(testbed_factory)
    master.start_probe(testbed.gateway_url, EXTRA_ROUTE_HOST.format(index=7), timeout_s=60)
    waiting = until(master.probe, 10, "the probe's first 20 polls", ready=lambda probe: probe.polls >= 20)
    assert waiting.state == "running" and waiting.last_status == 404, waiting
    before = time.time()
    testbed.start_envoy(0.5, ENVOY_MEMORY, 1, extra_routes=10)  # a rollout with the route added
    after = time.time()
    until(lambda: master.probe().state == "done", 10, "the probe to see the new route answer")
    done = master.probe()
    assert done.first_2xx_at is not None and done.seconds is not None and done.last_status == 200
    assert before < done.first_2xx_at < after + 1.0, (before, done, after)
    assert done.seconds / 0.01 * 0.3 <= done.polls <= done.seconds / 0.01 + 5, done  # one poll per 10 ms or so


@pytest.mark.slow
@pytest.mark.nightly  # timings (idle timeouts, refreshes, polls); the gate's memory sweep holds connections
def test_a_probe_of_a_route_that_never_comes_times_out_after_a_bounded_number_of_polls(testbed_factory):
    testbed, master = _up(testbed_factory, extra_routes=10)
    master.start_probe(testbed.gateway_url, EXTRA_ROUTE_HOST.format(index=10), timeout_s=1.0)  # hosts 0-9 exist
    until(lambda: master.probe().state != "running", 5, "the probe to stop at its timeout")
    result = master.probe()
    assert result.state == "timeout" and result.first_2xx_at is None and result.last_status == 404, result
    assert 20 <= result.polls <= 101, result
    with pytest.raises(LoadGeneratorError, match="timeout_s: a number of seconds above 0, at most 600"):
        master.start_probe(testbed.gateway_url, HOST, timeout_s=601)

"""Hold N idle keep-alive connections to the gateway from the Locust master: the memory model's load.

Envoy's memory grows with the connections it holds, not with requests per second. The holder opens
`count` connections to `url` (at most `open_rate` per second, at most OPEN_CONCURRENCY in flight), sends
one GET on each (Envoy allocates a connection's HTTP state on its first request) and reads the answer,
then keeps it open. Envoy closes a connection idle for 60 s (Contour's idle timeout), so each one sends
another GET every `refresh_s`, each on its own phase: the refreshes spread out to count / refresh_s
requests per second, a light load that is known in advance. Between refreshes each connection waits for
its socket to become readable, so a connection the gateway closes is counted when it happens.

A connection that fails to open, or that the gateway closes, is counted and not reopened: a gateway
refusing connections (an overload manager's cap) must show up in the counts, not in a reconnect loop.
`hold` replaces whatever was held; `release` closes everything (also what the dead-man switch calls when
the runner falls silent). Served by gateway_sizer_stats.py as `/gateway-sizer/connections`.
"""

from __future__ import annotations

import random
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
from gevent.lock import BoundedSemaphore
from gevent.pool import Group
from plain_http import PeerClosed, ProtocolError, connect, exchange, get_request, http_target, target_fields

MAX_CONNECTIONS = 60_000  # the holder's own bound; a scenario asks for at most 25,000 (runner/scenario/limits.py)
MIN_REFRESH_S = 1.0
MAX_REFRESH_S = 55.0  # below Envoy's 60 s idle timeout
MAX_OPEN_RATE = 10_000.0  # connections opened per second
OPEN_CONCURRENCY = 256  # connects and first requests in flight at once
CONNECT_TIMEOUT_S = 5.0
EXCHANGE_TIMEOUT_S = 10.0
NOFILE_MARGIN = 1024  # file descriptors kept for the master itself (web UI, workers, logs)
EPHEMERAL_MARGIN = 1024  # ports kept for everything else on the machine (or pod)
PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
RELEASE_TIMEOUT_S = 10.0
MIN_WAIT_S = 0.001  # a socket timeout of 0 would make it non-blocking
MAX_ERROR_TEXT = 200


class HoldError(ValueError):
    """A hold that cannot be done as asked (bad field, too many connections for the limits here)."""


@dataclass(frozen=True)
class HoldRequest:
    """What to hold: `count` connections to `url`, each sending GET `path` with `host_header`."""

    count: int
    url: str
    host_header: str
    path: str = "/"
    refresh_s: float = 25.0
    open_rate: float = 1000.0

    @classmethod
    def from_json(cls, body: Any) -> HoldRequest:
        """Validate a JSON body; HoldError names the first bad field."""
        if not isinstance(body, dict):
            raise HoldError('expected JSON {"count": N, "url": "http://host:port", "host_header": "...", ...}')
        count = body.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_CONNECTIONS:
            raise HoldError(f"count: a whole number from 0 to {MAX_CONNECTIONS}")
        try:
            url, host, path = target_fields(body, check=count > 0)  # count 0 releases: no target needed
        except ValueError as error:
            raise HoldError(str(error)) from None
        refresh = body.get("refresh_s", 25.0)
        rate = body.get("open_rate", 1000.0)
        for name, value, low, high in (("refresh_s", refresh, MIN_REFRESH_S, MAX_REFRESH_S),
                                       ("open_rate", rate, 1.0, MAX_OPEN_RATE)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise HoldError(f"{name}: a number from {low:g} to {high:g}")
        return cls(count, url, host, path, float(refresh), float(rate))


def _port_budget() -> int | None:
    """Ephemeral ports for connections to one destination (None: not readable here)."""
    try:
        low, high = (int(v) for v in PORT_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return None
    return high - low + 1


def ensure_descriptors(count: int) -> None:
    """Raise RLIMIT_NOFILE to hold `count` connections (the hard limit too, when privileged); HoldError
    when it cannot be raised far enough, or when there are not enough ephemeral ports."""
    ports = _port_budget()
    if ports is not None and count > ports - EPHEMERAL_MARGIN:
        raise HoldError(
            f"count: {count} connections to one address need more than the {ports} ephemeral ports "
            f"(net.ipv4.ip_local_port_range) less {EPHEMERAL_MARGIN}; hold fewer"
        )
    needed = count + NOFILE_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(hard, needed)))
    except (ValueError, OSError):
        raise HoldError(
            f"count: {count} connections need {needed} file descriptors, and this process may open at most "
            f"{hard} (RLIMIT_NOFILE hard limit); raise it (ulimit -n, or the pod's runtime) or hold fewer"
        ) from None


class ConnectionHolder:
    """Holds connections; `status()` is what `GET /gateway-sizer/connections` returns."""

    def __init__(self) -> None:
        self._group = Group()
        self._sockets: set[Any] = set()  # every open socket, answered or not (closed again on release)
        self._generation = 0
        self._reset(None)

    def _reset(self, request: HoldRequest | None) -> None:
        self.request = request
        self.state = "idle" if request is None else "opening"
        self.held = self.opened = self.failed = self.closed_by_peer = self.refreshed = self.non_2xx = 0
        self.last_error: str | None = None
        self.started_at = time.time()
        self.opening_s: float | None = None

    def hold(self, request: HoldRequest) -> None:
        """Release what is held, then open `request.count` connections in the background."""
        if request.count:
            ensure_descriptors(request.count)
        was_holding = self.request is not None
        self.release()
        self._reset(request if request.count else None)
        if not request.count and was_holding:  # `count: 0` is a release: say so, as the dead-man switch's does
            self.state = "released"
        if request.count:
            self._group.spawn(self._open_all, request, self._generation)

    def release(self) -> bool:
        """Close every held connection; True when there was something to release."""
        busy = bool(self._group) or bool(self._sockets)
        self._generation += 1
        self._group.kill(block=True, timeout=RELEASE_TIMEOUT_S)
        for sock in list(self._sockets):
            sock.close()
        self._sockets.clear()
        self.held = 0
        if self.request is not None:
            self.state = "released"
        return busy

    def _open_all(self, request: HoldRequest, generation: int) -> None:
        opening = BoundedSemaphore(OPEN_CONCURRENCY)
        start = time.monotonic()
        for slot in range(request.count):
            delay = start + slot / request.open_rate - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            opening.acquire()
            if generation != self._generation:
                return
            self._group.spawn(self._keep, request, opening, generation)
        while opening.counter < OPEN_CONCURRENCY:  # the last ones still opening
            gevent.sleep(0.05)
        if generation == self._generation:
            self.opening_s = time.monotonic() - start
            self.state = "holding"

    def _error(self, error: BaseException) -> None:
        self.last_error = f"{type(error).__name__}: {error}"[:MAX_ERROR_TEXT]

    def _answered(self, status: int) -> None:
        if not 200 <= status < 300:
            self.non_2xx += 1

    def _keep(self, request: HoldRequest, opening: BoundedSemaphore, generation: int) -> None:
        """One connection: open it, one GET, then a GET every refresh_s until it closes or is released."""
        sock, held, raw = None, False, b""
        try:
            try:
                host, port = http_target(request.url)
                raw = get_request(request.path, request.host_header)
                sock = connect(host, port, CONNECT_TIMEOUT_S)
                self._sockets.add(sock)
                answer = exchange(sock, raw, EXCHANGE_TIMEOUT_S)
            except (OSError, ProtocolError, ValueError) as error:  # ValueError: a URL or header it cannot send
                self.failed += 1
                self._error(error)
                return
            finally:
                opening.release()  # whatever happened, the next connection may open
            self.opened += 1
            self._answered(answer.status)
            if not answer.keep_alive:
                self.closed_by_peer += 1
                return
            self.held += 1
            held = True
            self._idle(sock, raw, request.refresh_s)
        finally:
            if held and generation == self._generation:  # a release has reset the counts already
                self.held -= 1
            if sock is not None:
                self._sockets.discard(sock)
                sock.close()

    def _idle(self, sock: Any, raw: bytes, refresh_s: float) -> None:
        """Wait on the socket between refreshes: readable means the gateway closed it (or sent bytes nobody
        asked for); each refresh is one more GET. The first refresh comes at a random phase."""
        next_refresh = time.monotonic() + random.uniform(0, refresh_s)
        while True:
            sock.settimeout(max(MIN_WAIT_S, next_refresh - time.monotonic()))
            try:
                unexpected = sock.recv(1)
            except TimeoutError:
                unexpected = None
            except OSError as error:
                self.closed_by_peer += 1
                self._error(error)
                return
            if unexpected is not None:
                self.closed_by_peer += 1
                self._error(PeerClosed("closed by the server while idle" if not unexpected else "unasked bytes"))
                return
            next_refresh += refresh_s
            try:
                answer = exchange(sock, raw, EXCHANGE_TIMEOUT_S)
            except (OSError, ProtocolError) as error:
                self.closed_by_peer += 1
                self._error(error)
                return
            self.refreshed += 1
            self._answered(answer.status)
            if not answer.keep_alive:
                self.closed_by_peer += 1
                return

    def status(self) -> dict[str, Any]:
        request = self.request
        return {
            "state": self.state,
            "requested": request.count if request else 0,
            "url": request.url if request else None,
            "refresh_s": request.refresh_s if request else None,
            "held": self.held,
            "opened": self.opened,
            "failed": self.failed,
            "closed_by_peer": self.closed_by_peer,
            "refreshed": self.refreshed,
            "non_2xx": self.non_2xx,
            "last_error": self.last_error,
            "started_at": self.started_at,
            "opening_s": self.opening_s,
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        }

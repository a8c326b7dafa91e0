"""Poll a route through the gateway until it answers 2xx: how long the gateway took to program a route.

Run from the Locust master (on Kubernetes it sits inside the cluster, next to Envoy's Service, and can
send any Host header, which the API server's service proxy cannot). `start` begins polling `url` + `path`
with `host_header` every POLL_INTERVAL_S on one keep-alive connection (reopened whenever it fails), until
the first 2xx answer or `timeout_s`; `result()` says when that answer came (this master's wall clock),
after how many polls, and the last status or error before it. A runner starts the probe, then creates
the route, and reads the result; both clocks' readings are in the result for it to line up. Served by
gateway_sizer_stats.py as `/gateway-sizer/probe`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gevent
from plain_http import ProtocolError, connect, exchange, get_request, http_target, target_fields

POLL_INTERVAL_S = 0.01
MAX_TIMEOUT_S = 600.0
MAX_POLLS = int(MAX_TIMEOUT_S / POLL_INTERVAL_S) + 1
CONNECT_TIMEOUT_S = 1.0
EXCHANGE_TIMEOUT_S = 2.0
MAX_ERROR_TEXT = 200


class ProbeError(ValueError):
    """A probe request with a bad field."""


@dataclass(frozen=True)
class ProbeRequest:
    url: str
    host_header: str
    path: str = "/"
    timeout_s: float = 60.0

    @classmethod
    def from_json(cls, body: Any) -> ProbeRequest:
        """Validate a JSON body; ProbeError names the first bad field."""
        if not isinstance(body, dict):
            raise ProbeError('expected JSON {"url": "http://host:port", "host_header": "...", "path": "/", ...}')
        try:
            url, host, path = target_fields(body)
        except ValueError as error:
            raise ProbeError(str(error)) from None
        timeout = body.get("timeout_s", 60.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
            raise ProbeError(f"timeout_s: a number of seconds above 0, at most {MAX_TIMEOUT_S:g}")
        return cls(url, host, path, float(timeout))


class RouteProbe:
    """One probe at a time; `result()` is what `GET /gateway-sizer/probe` returns."""

    def __init__(self) -> None:
        self._greenlet: gevent.Greenlet | None = None
        self._reset(None)

    def _reset(self, request: ProbeRequest | None) -> None:
        self.request = request
        self.state = "idle" if request is None else "running"
        self.started_at: float | None = time.time() if request else None
        self.first_2xx_at: float | None = None
        self.polls = 0
        self.last_status: int | None = None
        self.last_error: str | None = None

    def start(self, request: ProbeRequest) -> None:
        """Stop any running probe and start polling for `request`."""
        self.stop()
        self._reset(request)
        self._greenlet = gevent.spawn(self._poll, request)

    def stop(self) -> bool:
        """Stop a running probe; True when one was running."""
        running = self._greenlet is not None and not self._greenlet.dead
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=5)
            self._greenlet = None
        if running:
            self.state = "stopped"
        return running

    def _poll(self, request: ProbeRequest) -> None:
        host, port = http_target(request.url)
        raw = get_request(request.path, request.host_header)
        deadline = time.monotonic() + request.timeout_s
        sock = None
        try:
            while self.polls < MAX_POLLS and time.monotonic() < deadline:
                tick = time.monotonic() + POLL_INTERVAL_S
                self.polls += 1
                try:
                    if sock is None:
                        sock = connect(host, port, CONNECT_TIMEOUT_S)
                    answer = exchange(sock, raw, EXCHANGE_TIMEOUT_S)
                except (OSError, ProtocolError) as error:
                    self.last_error = f"{type(error).__name__}: {error}"[:MAX_ERROR_TEXT]
                    if sock is not None:
                        sock.close()
                        sock = None
                else:
                    self.last_status = answer.status
                    if 200 <= answer.status < 300:
                        self.first_2xx_at = time.time()
                        self.state = "done"
                        return
                    if not answer.keep_alive:
                        sock.close()
                        sock = None
                gevent.sleep(max(0.0, tick - time.monotonic()))
            self.state = "timeout"
        finally:
            if sock is not None:
                sock.close()

    def result(self) -> dict[str, Any]:
        request = self.request
        return {
            "state": self.state,
            "host_header": request.host_header if request else None,
            "started_at": self.started_at,
            "first_2xx_at": self.first_2xx_at,
            "seconds": self.first_2xx_at - self.started_at if self.first_2xx_at and self.started_at else None,
            "polls": self.polls,
            "last_status": self.last_status,
            "last_error": self.last_error,
            "now": time.time(),
        }

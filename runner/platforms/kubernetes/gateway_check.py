"""Checks through the gateway before a configuration is measured on Kubernetes: Envoy serves a TLS
profile's virtual host, and the backend answers a body profile's path with that many bytes.

The requests go from the run's Locust master, inside the cluster (locustfiles/gateway_sizer_fetch.py),
with the Host header, TLS SNI and Accept-Encoding the load will send: the API server's service proxy
cannot carry a Host header of its own to Envoy, and the runner may sit outside the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from runner.errors import LoadGeneratorError, PlatformError, UnreachableError
from runner.http import timeout
from runner.locust import LoadTarget, LocustMaster

FETCH_PATH = "/gateway-sizer/fetch"  # FETCH_ROUTE in locustfiles/gateway_sizer_fetch.py
SERVED_TIMEOUT_S = 90.0  # for Envoy to serve a TLS virtual host Contour has marked valid
POLL_S = 1.0
CALL_TIMEOUT_S = 12.0  # the master's own fetch gives up after 3 s to connect and 5 s to read
COMMON_BODIES = "1k, 16k and 256k"  # what the project's backend serves (charts/gateway-loadtest nginx.bodies)


@dataclass(frozen=True)
class Fetched:
    """One GET through the gateway: its status (0 when no answer came), body bytes and error."""

    status: int
    body_bytes: int
    error: str | None = None

    def describe(self) -> str:
        if self.status == 0:
            return f"no answer ({self.error or 'unknown error'})"
        return f"HTTP {self.status} with {self.body_bytes:,} body bytes"


def fetch(master: LocustMaster, target: LoadTarget, accept_encoding: str = "") -> Fetched:
    """GET `target` once from the Locust master."""
    body = {"url": target.url, "host_header": target.host_header, "path": target.path,
            "accept_encoding": accept_encoding}  # fmt: skip
    try:
        response = master.client.post(master.base_url + FETCH_PATH, json=body, timeout=timeout(CALL_TIMEOUT_S))
    except requests.RequestException as error:
        raise UnreachableError(f"Locust master at {master.base_url} unreachable ({type(error).__name__})") from None
    data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
    if response.status_code >= 400 or not data.get("success"):
        message = " ".join(str(data.get("message", "")).split())[:300]
        raise LoadGeneratorError(f"Locust master answered POST {FETCH_PATH} with HTTP {response.status_code} {message}")
    return Fetched(int(data.get("status") or 0), int(data.get("body_bytes") or 0), data.get("error"))


def wait_served(
    master: LocustMaster,
    target: LoadTarget,
    timeout_s: float = SERVED_TIMEOUT_S,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Fetched:
    """Return once GET `target` answers 200 through the gateway; PlatformError at the deadline."""
    deadline = monotonic() + timeout_s
    while True:
        fetched = fetch(master, target)
        if fetched.status == 200:
            return fetched
        if monotonic() >= deadline:
            raise PlatformError(
                f"the gateway does not serve {target.url} with Host {target.host_header}: GET {target.path} got "
                f"{fetched.describe()} after {timeout_s:.0f} s",
                "check the run's HTTPProxy status and Contour's and Envoy's logs",
            )
        sleep(POLL_S)


def check_body(master: LocustMaster, target: LoadTarget, size: int, accept_encoding: str) -> None:
    """PlatformError (one line naming the size and the fix) unless GET `target` through the gateway
    answers 200 with exactly `size` body bytes, sent as the load sends it."""
    fetched = fetch(master, target, accept_encoding)
    if fetched.status == 200 and fetched.body_bytes == size:
        return
    raise PlatformError(
        f"the backend does not serve {size:,}-byte bodies: GET {target.path} with Host "
        f"{target.host_header} through the gateway got {fetched.describe()}",
        f"add {size} to nginx.bodies.sizes of charts/gateway-loadtest (or serve a {size}-byte file at "
        f"{target.path}), or use a body size it serves ({COMMON_BODIES})",
    )

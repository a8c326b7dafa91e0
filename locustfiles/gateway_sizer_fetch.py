"""Master-side extension: one GET through the gateway, for the runner's checks before it measures.

`POST /gateway-sizer/fetch` with JSON `{"url": "https://envoy.projectcontour.svc.cluster.local",
"host_header": "tls.external.nginx", "path": "/size/16384", "accept_encoding": "gzip, deflate, br"}` sends
one GET with the lean client the load uses (lean_http.py: TLS SNI from the Host header, any certificate
accepted) and answers `{"success": true, "status": 200, "body_bytes": 16384, "error": null, "seconds": 0.01}`;
status 0 and an error when no answer came. On Kubernetes the master sits inside the cluster next to Envoy's
Service and can send any Host header, which the API server's service proxy cannot. Only the gateway's host
(the host of the master's `--host`) may be fetched.

The kubernetes platform loads this file next to the locustfile on the master.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from flask import request
from lean_http import HttpStatusError, LeanHttpClient
from locust import events
from locust.env import Environment
from locust.event import EventHook

FETCH_ROUTE = "/gateway-sizer/fetch"
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 5.0  # both below the runner's 10 s for one call to the master
MAX_FIELD = 2000
MAX_ERROR_TEXT = 300


class FetchError(ValueError):
    """A fetch request with a bad field."""


def parse(body: Any, gateway_url: str | None) -> tuple[str, str, str, str]:
    """(url, host_header, path, accept_encoding) of a valid request for the gateway at `gateway_url`;
    FetchError naming the first bad field."""
    if not isinstance(body, dict):
        raise FetchError('expected JSON {"url": ..., "host_header": ..., "path": "/...", "accept_encoding": ...}')
    fields = [body.get(k, "") for k in ("url", "host_header", "path", "accept_encoding")]
    if not all(isinstance(v, str) and v.isprintable() and len(v) <= MAX_FIELD for v in fields):
        raise FetchError(f"url, host_header, path, accept_encoding: printable text, at most {MAX_FIELD} characters")
    url, host_header, path, accept_encoding = fields
    parts = urlsplit(url)
    gateway = urlsplit(gateway_url or "").hostname
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.hostname != gateway:
        raise FetchError(f"url: http(s) URL of the gateway's host {gateway}, got {url!r}")
    if not host_header or not path.startswith("/"):
        raise FetchError("host_header: a host name; path: an absolute path")
    return url, host_header, path, accept_encoding


def fetch(url: str, host_header: str, path: str, accept_encoding: str = "") -> dict[str, Any]:
    """One GET of `url` + `path` with `host_header`: status (0: no answer), body bytes, error, seconds."""
    seen: dict[str, Any] = {}
    reported = EventHook()  # the client's request event, kept out of the master's statistics
    reported.add_listener(lambda **kwargs: seen.update(kwargs))
    client = LeanHttpClient(url, reported, connect_timeout_s=CONNECT_TIMEOUT_S, read_timeout_s=READ_TIMEOUT_S,
                            host_header=host_header)  # fmt: skip
    headers = {"Accept-Encoding": accept_encoding} if accept_encoding else None
    start = time.monotonic()
    try:
        status = client.send(client.prepare("GET", path, headers=headers))
    finally:
        client.close()
    error = seen.get("exception")
    text = None if error is None or isinstance(error, HttpStatusError) else f"{type(error).__name__}: {error}"
    return {
        "status": status,
        "body_bytes": int(seen.get("response_length") or 0),
        "error": " ".join(text.split())[:MAX_ERROR_TEXT] if text else None,
        "seconds": round(time.monotonic() - start, 4),
    }


@events.init.add_listener
def _register_route(environment: Environment, web_ui: Any = None, **_kwargs: Any) -> None:
    if web_ui is None:  # workers have no web UI
        return

    @web_ui.app.route(FETCH_ROUTE, methods=["POST"])
    def fetch_route() -> tuple[dict[str, Any], int]:
        try:
            url, host_header, path, accept_encoding = parse(request.get_json(silent=True), environment.host)
        except FetchError as error:
            return {"success": False, "message": str(error)}, 400
        return {"success": True, **fetch(url, host_header, path, accept_encoding)}, 200

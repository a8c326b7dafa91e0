"""A lean HTTP/1.1 client for Locust: one keep-alive connection per user, request bytes prepared once.

Locust's FastHttpUser spends most of a generator core in its wrappers (URL joining, header dicts,
response objects, redirect and decompression handling). A gateway benchmark sends the same request
over and over, so this client builds each request's bytes once, keeps one persistent connection per
user, parses only what framing needs and discards the body (see lean_http_wire.py). Every request
still goes through Locust's `request` event the way FastHttpUser reports it (request_type = method,
name, response_time in ms, response_length = body bytes, exception), so the web UI, CSV files,
percentiles and failure ratio work unchanged. Status >= 400, timeouts, connection and protocol errors
are failures.

Scope: HTTP/1.1 (HTTP/1.0 answers are understood) over TCP, optionally TLS with ALPN `http/1.1`.
HTTP/2 is out of scope, and so are redirects (a 3xx is a success), cookies, request bodies and content
decoding (the length counted is the body on the wire, compressed or not).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lean_http_wire import Connection, PlainTransport, ProtocolError, StreamTransport, Transport, tls_context
from locust import User
from locust.event import EventHook
from locust.exception import LocustError

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
USER_AGENT = "gateway-sizer-lean/1"
DEFAULT_PORTS = {"http": 80, "https": 443}
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})  # RFC 9110 9.2.2

__all__ = ["HttpStatusError", "LeanHttpClient", "LeanHttpUser", "PreparedRequest", "ProtocolError", "Target"]


class HttpStatusError(Exception):
    """The server answered with a status >= 400."""


@dataclass(frozen=True)
class PreparedRequest:
    """A request's wire bytes, built once, and how Locust's statistics name it."""

    method: str
    name: str
    url: str
    raw: bytes
    expects_body: bool  # not HEAD
    idempotent: bool  # may be sent again when a reused connection turns out closed


@dataclass(frozen=True)
class Target:
    """Where the client connects: scheme, address, default Host header and base path."""

    tls: bool
    host: str
    port: int
    authority: str
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise LocustError(f"the lean HTTP client needs an http:// or https:// host, got {url!r}")
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        return cls(parts.scheme == "https", parts.hostname, port, parts.netloc, parts.path.rstrip("/"))

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.authority}"


def build_request(method: str, target: str, host_header: str, headers: dict[str, str] | None = None) -> bytes:
    """The request head for `method target`: Host, User-Agent, Accept, then `headers`."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}", f"User-Agent: {USER_AGENT}", "Accept: */*"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    for line in lines:
        if any(c in line for c in "\r\n\0"):
            raise ValueError(f"request line or header contains CR, LF or NUL: {line!r}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def host_of(authority: str) -> str:
    """The host part of a Host header value (for TLS SNI)."""
    if authority.startswith("["):
        return authority[1 : authority.find("]")]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


class LeanHttpClient:
    """Sends prepared requests over one connection; reports each through Locust's request event."""

    def __init__(
        self,
        base_url: str,
        request_event: EventHook,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        verify_tls: bool = False,
        host_header: str | None = None,
    ) -> None:
        self.target = target = Target.parse(base_url)
        self.host_header = host_header or target.authority
        if target.tls:
            context, sni = tls_context(verify=verify_tls), host_of(self.host_header)

            def connect() -> Transport:
                return StreamTransport.connect_tls(target.host, target.port, connect_timeout_s, read_timeout_s,
                                                   context, sni)  # fmt: skip
        else:

            def connect() -> Transport:
                return PlainTransport.connect(target.host, target.port, connect_timeout_s, read_timeout_s)

        self.connection = Connection(connect)
        self._fire = request_event.fire
        self._prepared: dict[tuple[str, str, str | None, tuple[tuple[str, str], ...]], PreparedRequest] = {}

    def prepare(
        self,
        method: str,
        path: str,
        *,
        name: str | None = None,
        host_header: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> PreparedRequest:
        """Build a request's bytes once; `name` (default: `path`) labels it in Locust's statistics."""
        method = method.upper()
        target = self.target.base_path + path
        raw = build_request(method, target, host_header or self.host_header, headers)
        return PreparedRequest(method, name or path, self.target.origin + target, raw, method != "HEAD",
                               method in IDEMPOTENT_METHODS)  # fmt: skip

    def send(self, request: PreparedRequest, scheduled: float | None = None) -> int:
        """Send `request` and fire Locust's request event; return the status (0 when none came).

        `scheduled` is when an open-loop schedule meant the request to start (time.monotonic()): its
        response time counts from then, so a request delayed behind a slow one counts its wait
        (no coordinated omission). Without it, the time counts from the send.
        """
        start_time = time.time()
        now = time.monotonic()
        start = min(scheduled, now) if scheduled is not None else now
        status = length = 0
        exception: Exception | None = None
        try:
            status, length = self.connection.exchange(request.raw, request.expects_body, request.idempotent)
        except (OSError, ProtocolError) as error:  # TimeoutError, ConnectionError, ssl.SSLError are OSErrors
            exception = error
        response_time = (time.monotonic() - start) * 1000.0
        if status >= 400:
            exception = HttpStatusError(f"HTTP {status}")
        self._fire(
            request_type=request.method, name=request.name, response_time=response_time,
            response_length=length, exception=exception, context={}, response=None,
            start_time=start_time, url=request.url,
        )  # fmt: skip
        return status

    def request(self, method: str, path: str, *, name: str | None = None, headers: dict[str, str] | None = None) -> int:
        """Send `method path`, its bytes built on first use (per method, path, name and headers)."""
        key = (method, path, name, tuple(headers.items()) if headers else ())
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = self.prepare(method, path, name=name, headers=headers)
        return self.send(prepared)

    def get(self, path: str, *, name: str | None = None, headers: dict[str, str] | None = None) -> int:
        return self.request("GET", path, name=name, headers=headers)

    def head(self, path: str, *, name: str | None = None, headers: dict[str, str] | None = None) -> int:
        return self.request("HEAD", path, name=name, headers=headers)

    def close(self) -> None:
        self.connection.close()


class LeanHttpUser(User):
    """A Locust user whose `client` is a `LeanHttpClient` (HTTP/1.1; HTTP/2 is out of scope).

    Timeouts and certificate checking are class attributes, as on FastHttpUser.
    """

    abstract = True
    connection_timeout: float = CONNECT_TIMEOUT_S
    network_timeout: float = READ_TIMEOUT_S
    insecure: bool = True  # accept any server certificate (self-signed gateways), as FastHttpUser does

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        if self.host is None:
            raise LocustError("You must specify the base host: --host, the web UI, or the class's `host`")
        self.client = LeanHttpClient(
            self.host, environment.events.request, connect_timeout_s=self.connection_timeout,
            read_timeout_s=self.network_timeout, verify_tls=not self.insecure, host_header=self.default_host_header(),
        )  # fmt: skip

    def default_host_header(self) -> str | None:
        """The client's Host header, and over TLS the server name (SNI) it offers; None: the host's."""
        return None

    def on_stop(self) -> None:
        self.client.close()

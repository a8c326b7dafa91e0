"""One GET at a time on a plain keep-alive HTTP/1.1 connection, for the master-side helpers.

The connection holder and the route probe (connection_holder.py, route_probe.py) need only a status
per request, on connections they keep open themselves. This module connects with gevent's cooperative
sockets, sends a request built by the lean client (lean_http.build_request, with `Accept-Encoding:
identity` so bodies come with a Content-Length), reads the head (framing parsed by
lean_http_wire.parse_head) and the body, and says whether the connection may be reused. Reads and the
body are bounded; a body without a length ends the connection.
"""

from __future__ import annotations

import socket
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from gevent import socket as gevent_socket
from lean_http import build_request
from lean_http_wire import ProtocolError, parse_head

RECV_BYTES = 65536
MAX_HEAD_BYTES = 65536
MAX_BODY_BYTES = 16 * 2**20  # a gateway's 404/503 or a small page: far below this
_HEAD_END = b"\r\n\r\n"

__all__ = [
    "Answer",
    "PeerClosed",
    "ProtocolError",
    "connect",
    "exchange",
    "get_request",
    "http_target",
    "target_fields",
]


class PeerClosed(ConnectionError):
    """The server closed the connection (EOF or reset) before a whole answer arrived."""


class Answer(NamedTuple):
    status: int
    keep_alive: bool  # False: the server closes the connection (or the body ran to its end)


def http_target(url: str) -> tuple[str, int]:
    """(host, port) of a plain `http://host[:port]` URL; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"expected an http://host[:port] URL, got {url[:80]!r}")
    return parts.hostname, parts.port or 80


MAX_FIELD_CHARS = 2000


def target_fields(body: dict[str, Any], *, check: bool = True) -> tuple[str, str, str]:
    """`url`, `host_header` and `path` of a helper's JSON request, validated (`check`: as a target too);
    ValueError naming what is wrong."""
    given = (body.get("url", ""), body.get("host_header", ""), body.get("path", "/"))
    if not all(isinstance(v, str) and v.isprintable() and len(v) <= MAX_FIELD_CHARS for v in given):
        raise ValueError("url, host_header and path: printable text")
    url, host, path = (str(v) for v in given)
    if check:
        try:
            http_target(url)
        except ValueError as error:
            raise ValueError(f"url: {error}") from None
        if not host or not path.startswith("/"):
            raise ValueError("host_header: a host name; path: an absolute path")
    return url, host, path


def get_request(path: str, host_header: str) -> bytes:
    """A GET's wire bytes, asking for no content coding (so the body has a Content-Length)."""
    return build_request("GET", path, host_header, {"Accept-Encoding": "identity"})


def connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connected cooperative TCP socket with TCP_NODELAY; OSError on failure or timeout."""
    sock = gevent_socket.create_connection((host, port), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv(sock: socket.socket) -> bytes:
    try:
        data = sock.recv(RECV_BYTES)
    except ConnectionResetError:
        raise PeerClosed("connection reset by the server") from None
    return data


def exchange(sock: socket.socket, raw: bytes, timeout_s: float) -> Answer:
    """Send `raw` and read the whole answer within `timeout_s` per read. Raises PeerClosed, ProtocolError,
    or OSError (a timeout is `TimeoutError`)."""
    sock.settimeout(timeout_s)
    try:
        sock.sendall(raw)
    except (BrokenPipeError, ConnectionResetError):
        raise PeerClosed("connection closed by the server before the request was sent") from None
    data = b""
    while (end := data.find(_HEAD_END)) < 0:
        chunk = _recv(sock)
        if not chunk:
            raise PeerClosed("connection closed by the server before it answered")
        data += chunk
        if len(data) > MAX_HEAD_BYTES:
            raise ProtocolError(f"response head longer than {MAX_HEAD_BYTES} bytes")
    head = parse_head(data[:end])
    if head.status < 200:
        raise ProtocolError(f"interim status {head.status}")
    if head.content_length is None:
        return Answer(head.status, False)  # chunked or to the connection's end: not worth reading
    if head.content_length > MAX_BODY_BYTES:
        raise ProtocolError(f"body of {head.content_length} bytes, more than {MAX_BODY_BYTES}")
    missing = head.content_length - (len(data) - end - 4)
    while missing > 0:
        chunk = _recv(sock)
        if not chunk:
            raise PeerClosed("connection closed by the server in the middle of a body")
        missing -= len(chunk)
    return Answer(head.status, head.keep_alive and missing == 0)

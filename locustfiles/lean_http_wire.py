"""HTTP/1.1 on the wire for the lean client: transports, response framing, one keep-alive connection.

Plain TCP uses a non-blocking stdlib socket driven straight by the gevent hub: after sending a request
it waits for readability before the first `recv` (no EAGAIN round trip), and read timeouts are checked
by one repeating timer per connection instead of a timer armed for every read. TLS goes through
gevent's cooperative `ssl` socket. Only the status line and the headers that frame the body
(Content-Length, Transfer-Encoding, Connection) are parsed; bodies are counted and discarded.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import socket
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from gevent import get_hub, getcurrent
from gevent import socket as gevent_socket
from gevent import ssl as gevent_ssl
from gevent.monkey import get_original

RECV_BYTES = 65536
MAX_HEADER_BYTES = 65536
MAX_CHUNK_LINE_BYTES = 4096
# A timeout fires between its limit and the limit plus one watchdog tick (this share of the limit).
WATCHDOG_TICK_SHARE = 0.25
MIN_WATCHDOG_TICK_S = 0.05
# Statuses whose responses never carry a body (RFC 9112 section 6.3); 1xx answers are interim.
BODYLESS_STATUSES = frozenset({204, 304})
HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_READ, _WRITE = 1, 2
_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"
_CONNECTION = b"\r\nconnection:"
_TRANSFER_ENCODING = b"\r\ntransfer-encoding:"
_CONTENT_LENGTH = b"\r\ncontent-length:"
_StdlibSocket = get_original("socket", "socket")  # not gevent's: this module drives the hub itself


class ProtocolError(Exception):
    """The server's answer is not valid HTTP/1.x framing."""


class _StaleConnection(Exception):
    """A reused connection was closed by the server before it answered: safe to send again once."""


class Transport(Protocol):
    """A connected byte stream whose reads and writes time out."""

    def sendall(self, data: bytes) -> None: ...
    def recv(self, size: int) -> bytes: ...
    def recv_reply(self, size: int) -> bytes: ...  # first read after a request: wait, then read
    def close(self) -> None: ...


class PlainTransport:
    """TCP through a non-blocking stdlib socket and the gevent hub's I/O watchers."""

    __slots__ = ("_deadline", "_hub", "_loop", "_read", "_sock", "_timeout_s", "_waiter", "_watchdog", "_what",
                 "_write")  # fmt: skip

    def __init__(self, sock: socket.socket, timeout_s: float, watchdog_tick_s: float) -> None:
        self._sock = sock
        self._hub = get_hub()
        self._loop = loop = self._hub.loop
        self._read = loop.io(sock.fileno(), _READ)
        self._write = loop.io(sock.fileno(), _WRITE)
        self._timeout_s = timeout_s
        self._waiter: Any = None  # the greenlet blocked on this socket, for the watchdog
        self._deadline = 0.0
        self._what = "read"
        self._watchdog = loop.timer(watchdog_tick_s, watchdog_tick_s, ref=False)
        self._watchdog.start(self._check_deadline)

    @classmethod
    def connect(cls, host: str, port: int, connect_timeout_s: float, read_timeout_s: float) -> PlainTransport:
        error: OSError | None = None
        tick = max(MIN_WATCHDOG_TICK_S, min(connect_timeout_s, read_timeout_s) * WATCHDOG_TICK_SHARE)
        for family, _, proto, _, address in gevent_socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            sock = _StdlibSocket(family, socket.SOCK_STREAM, proto)
            sock.setblocking(False)
            transport = cls(sock, read_timeout_s, tick)
            try:
                code = sock.connect_ex(address)
                if code == errno.EINPROGRESS:
                    transport._wait(transport._write, connect_timeout_s, "connect")
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:  # OSError(errno, text) is the matching subclass, e.g. ConnectionRefusedError
                    raise OSError(code, f"{os.strerror(code)} ({host}:{port})")
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return transport
            except OSError as failed:
                transport.close()
                error = failed
            except BaseException:
                transport.close()
                raise
        raise error or OSError(f"no address for {host}:{port}")

    def _check_deadline(self) -> None:
        """The watchdog: throw TimeoutError into a greenlet waiting past its deadline."""
        waiter = self._waiter
        if waiter is not None and self._loop.now() >= self._deadline:
            self._waiter = None
            waiter.throw(TimeoutError(f"{self._what} timed out"))

    def _wait(self, watcher: Any, timeout_s: float, what: str = "read") -> None:
        self._deadline = self._loop.now() + timeout_s
        self._what = what
        self._waiter = getcurrent()
        try:
            self._hub.wait(watcher)
        finally:
            self._waiter = None

    def sendall(self, data: bytes) -> None:
        try:
            sent = self._sock.send(data)  # a request head fits the socket buffer: one call
        except BlockingIOError:
            sent = 0
        while sent < len(data):
            self._wait(self._write, self._timeout_s, "write")
            try:
                sent += self._sock.send(data[sent:])
            except BlockingIOError:
                continue

    def recv(self, size: int) -> bytes:
        try:
            return self._sock.recv(size)
        except BlockingIOError:
            return self.recv_reply(size)

    def recv_reply(self, size: int) -> bytes:
        while True:
            self._wait(self._read, self._timeout_s)
            try:
                return self._sock.recv(size)
            except BlockingIOError:
                continue

    def close(self) -> None:
        self._watchdog.close()
        self._read.close()
        self._write.close()
        self._sock.close()


class StreamTransport:
    """A gevent socket (here: TLS) that keeps its own timeouts."""

    __slots__ = ("_sock",)

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    @classmethod
    def connect_tls(
        cls, host: str, port: int, connect_timeout_s: float, read_timeout_s: float,
        context: gevent_ssl.SSLContext, server_hostname: str,
    ) -> StreamTransport:  # fmt: skip
        sock = gevent_socket.create_connection((host, port), timeout=connect_timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = context.wrap_socket(sock, server_hostname=server_hostname)
            tls.settimeout(read_timeout_s)
        except BaseException:
            sock.close()
            raise
        return cls(tls)

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)

    def recv(self, size: int) -> bytes:
        return self._sock.recv(size)

    recv_reply = recv

    def close(self) -> None:
        self._sock.close()


@functools.cache
def tls_context(*, verify: bool) -> gevent_ssl.SSLContext:
    """A client TLS context offering only HTTP/1.1 by ALPN, one per process for every user and connection:
    a context that loads the system's CA store holds ~0.8 MB, so one per user ran a 256Mi Locust worker
    out of memory at 250 TLS users. `verify=False` accepts any certificate and loads no CA store."""
    if verify:
        context = gevent_ssl.create_default_context()
    else:
        context = gevent_ssl.SSLContext(gevent_ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = gevent_ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


class ResponseHead(NamedTuple):
    """What framing needs from a response head."""

    status: int
    content_length: int | None  # None: chunked, or (no Content-Length) the body runs to the connection's end
    chunked: bool
    keep_alive: bool


def parse_head(head: bytes) -> ResponseHead:
    """Parse a response head: the status line and header lines, without the final blank line."""
    lowered = head.lower()
    code = lowered[9:12]
    if (
        not lowered.startswith(b"http/1.")
        or lowered[8:9] != b" "
        or not code.isdigit()
        or lowered[12:13] not in (b"", b" ", b"\r")
    ):
        raise ProtocolError(f"bad status line {head[: head.find(_CRLF)][:40]!r}")
    connection = _field(lowered, _CONNECTION)
    # HTTP/1.1 keeps the connection unless told otherwise; HTTP/1.0 only when told to.
    keep_alive = b"close" not in connection if lowered[7:8] == b"1" else b"keep-alive" in connection
    encoding = _field(lowered, _TRANSFER_ENCODING)
    if encoding:
        # Chunked must be the last coding; otherwise the body runs to the connection's end (RFC 9112 6.3).
        return ResponseHead(int(code), None, encoding.rsplit(b",", 1)[-1].strip() == b"chunked", keep_alive)
    length = _field(lowered, _CONTENT_LENGTH)
    if not length:
        return ResponseHead(int(code), None, False, keep_alive)
    if not length.isdigit():
        values = {value.strip() for value in length.split(b",")}  # repeated fields must agree
        length = values.pop() if len(values) == 1 else b""
        if not length.isdigit():
            raise ProtocolError("bad Content-Length")
    return ResponseHead(int(code), int(length), False, keep_alive)


def _field(lowered: bytes, key: bytes) -> bytes:
    """The values of the header that `key` (CRLF, name, colon) starts in a lowercased head, comma-joined."""
    start = lowered.find(key)
    if start < 0:
        return b""
    start += len(key)
    end = lowered.find(_CRLF, start)
    if end < 0:
        end = len(lowered)
    if lowered.find(key, end) < 0:  # the usual case: the field once
        return lowered[start:end].strip()
    values = [lowered[start:end].strip()]
    while (start := lowered.find(key, end)) >= 0:
        start += len(key)
        end = lowered.find(_CRLF, start)
        if end < 0:
            end = len(lowered)
        values.append(lowered[start:end].strip())
    return b",".join(values)


class _Reader:
    """Buffered reads for the slow paths: chunked bodies, bodies larger than one read."""

    __slots__ = ("buf", "pos", "transport")

    def __init__(self, transport: Transport, data: bytes, pos: int) -> None:
        self.transport, self.buf, self.pos = transport, bytearray(data), pos

    def fill(self) -> None:
        more = self.transport.recv(RECV_BYTES)
        if not more:
            raise ProtocolError("connection closed before the response ended")
        del self.buf[: self.pos]
        self.pos = 0
        self.buf += more

    def line(self, limit: int) -> bytes:
        """The next line without its CRLF; ProtocolError when none ends within `limit` bytes."""
        end = self.buf.find(_CRLF, self.pos)
        while end < 0:
            searched = len(self.buf) - self.pos
            if searched > limit:
                raise ProtocolError("response line too long")
            self.fill()
            end = self.buf.find(_CRLF, max(0, searched - 1))
        line = bytes(self.buf[self.pos : end])
        self.pos = end + 2
        return line

    def skip(self, count: int) -> None:
        available = len(self.buf) - self.pos
        while available < count:
            count -= available
            self.buf.clear()
            self.pos = 0
            self.fill()
            available = len(self.buf)
        self.pos += count

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def drain(self) -> int:
        """Read to the connection's end; return how many bytes came after the current position."""
        count = len(self.buf) - self.pos
        while more := self.transport.recv(RECV_BYTES):
            count += len(more)
        return count


def read_chunked(reader: _Reader) -> int:
    """Consume a chunked body and its trailer fields; return the body's length."""
    length = 0
    while True:
        size_text = reader.line(MAX_CHUNK_LINE_BYTES).split(b";", 1)[0].strip()  # drop chunk extensions
        if not size_text or not HEX_DIGITS.issuperset(size_text):
            raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if size == 0:
            while reader.line(MAX_HEADER_BYTES):  # trailer fields, up to the blank line
                pass
            return length
        reader.skip(size)
        if reader.line(2):
            raise ProtocolError("chunk data not followed by CRLF")
        length += size


def _read_head(transport: Transport, data: bytes) -> tuple[ResponseHead, bytes, int]:
    """The slow path to the final head: more reads, interim 1xx answers. Returns (head, data, body start)."""
    while True:
        end = data.find(_HEAD_END)
        while end < 0:
            if len(data) > MAX_HEADER_BYTES:
                raise ProtocolError("response head too large")
            more = transport.recv(RECV_BYTES)
            if not more:
                raise ProtocolError("connection closed inside the response head")
            searched = len(data)
            data += more
            end = data.find(_HEAD_END, max(0, searched - 3))
        head = parse_head(data[:end])
        if head.status >= 200:
            return head, data, end + 4
        if head.status == 101:
            raise ProtocolError("unexpected 101 Switching Protocols")
        data = data[end + 4 :]  # an interim answer (100 Continue, 103 Early Hints) precedes the final one


class Connection:
    """One HTTP/1.1 keep-alive connection, opened on first use and reopened after the server closed it."""

    __slots__ = ("_connect", "_transport")

    def __init__(self, connect: Callable[[], Transport]) -> None:
        self._connect = connect
        self._transport: Transport | None = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def exchange(self, raw: bytes, expects_body: bool, idempotent: bool = True) -> tuple[int, int]:
        """Send `raw` and read the whole response; return (status, body length).

        Raises OSError (timeouts, refused or reset connections, TLS errors) or ProtocolError. When the
        server had closed a reused connection before answering, an idempotent request is sent once more
        on a new connection.
        """
        try:
            transport = self._transport
            if transport is not None:
                try:
                    return self._exchange(transport, raw, expects_body, True)
                except _StaleConnection:
                    self.close()
                    if not idempotent:
                        raise ProtocolError("connection closed before the response started") from None
            transport = self._transport = self._connect()
            try:
                return self._exchange(transport, raw, expects_body, False)
            except _StaleConnection:
                raise ProtocolError("connection closed before the response started") from None
        except BaseException:
            self.close()  # state unknown: an error, a timeout, or the greenlet killed mid-request
            raise

    def _exchange(self, transport: Transport, raw: bytes, expects_body: bool, reused: bool) -> tuple[int, int]:
        try:
            transport.sendall(raw)
            data = transport.recv_reply(RECV_BYTES)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):  # aborted: destroyed in between
            if reused:
                raise _StaleConnection() from None
            raise
        if not data:
            raise _StaleConnection()
        end = data.find(_HEAD_END)
        if end >= 0:
            head = parse_head(data[:end])
            body_start = end + 4
        if end < 0 or head.status < 200:
            head, data, body_start = _read_head(transport, data)
        if not expects_body or head.status in BODYLESS_STATUSES:
            length = 0
            extra = len(data) - body_start
        elif head.content_length is not None:
            length = head.content_length
            extra = len(data) - body_start - length
            if extra < 0:  # the body goes on beyond the first read
                reader = _Reader(transport, b"", 0)
                reader.skip(-extra)
                extra = reader.remaining()
        elif head.chunked:
            reader = _Reader(transport, data, body_start)
            length = read_chunked(reader)
            extra = reader.remaining()
        else:
            length = _Reader(transport, data, body_start).drain()
            extra = 1  # the body ended with the connection
        if not extra and not head.keep_alive:
            _await_close(transport)  # the server closes first, so its side keeps TIME_WAIT, not ours
        if extra or not head.keep_alive:
            self.close()  # the server closes it (or sent bytes nobody asked for)
        return head.status, length


def _await_close(transport: Transport) -> None:
    """Read the end of a connection the server said it closes (bounded by the read timeout)."""
    with contextlib.suppress(OSError):  # reset, TLS end without close_notify, timeout: closed either way
        transport.recv(1)

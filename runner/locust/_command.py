"""How gateway-sizer starts Locust: the master's and workers' command lines, the environment their processes get,
and the gateway locustfile's options (as command-line flags, and as the /swarm form fields the master forwards).

The master's HTTP API is runner.locust._master; the package's surface is runner.locust.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import UsageError
from runner.paths import LOCUSTFILE_DIR

if TYPE_CHECKING:
    from runner.scenario import LoadSpec

STATS_EXTENSION = "gateway_sizer_stats.py"
GUARD_EXTENSION = "gateway_sizer_guard.py"  # who may drive the master, where the load may go
TARGETS_ENV = "GATEWAY_SIZER_TARGETS"  # the names locustfiles/gateway_sizer_guard.py reads
TOKEN_ENV = "GATEWAY_SIZER_TOKEN"
# gevent's loop (libev) on Linux: its epoll backend sleeps whole milliseconds, so every user timer due within one
# fires in the same wake-up and requests leave a worker in sub-millisecond clusters, which cost Envoy less per
# request than independent clients' (docs/measurements.md, "gevent's loop"). libev's io_uring backend has
# microsecond timers and sends Poisson arrivals, but it aborts under a sweep's load (libev 4.33 in gevent 26.9:
# "io_uring_enter did not consume all sqes" at ~1,300 RPS over 260 connections), so workers stay on epoll unless
# GEVENT_BACKEND says otherwise, and paced users wait on a timerfd of their own (locustfiles/fine_timer.py) unless
# GATEWAY_SIZER_TIMER=gevent.
LOOP_ENV = "GEVENT_BACKEND"
DEFAULT_LOOP = "epoll"
TIMER_ENV = "GATEWAY_SIZER_TIMER"  # the name locustfiles/fine_timer.py reads: a timerfd per worker, or gevent.sleep
DEFAULT_TIMER = "fine"
TIMERS = ("fine", "gevent")
WEB_PORT = 8089
MASTER_PORT = 5557
LOG_LEVEL = "WARNING"
# The gateway locustfile's user classes, by the scenario's `load.client`.
USER_CLASSES = {"fasthttp": "FastGatewayUser", "lean": "LeanGatewayUser"}
FLAGS = frozenset({"new_connection"})  # the gateway locustfile's options that are flags, not values


def user_class(load: LoadSpec) -> str:
    """The Locust user class a scenario runs: its explicit `user_class`, or the one implementing `client`."""
    return load.user_class or USER_CLASSES[load.client]


@dataclass(frozen=True)
class LocustOptions:
    """The gateway locustfile's own options (see locustfiles/gateway.py)."""

    host_header: str
    request_path: str
    user_rps: float = 0.0
    arrivals: str = "poisson"
    accept_encoding: str = "gzip, deflate, br"
    new_connection: bool = False  # every request on a new connection (the new-connection traffic profiles)

    @classmethod
    def from_load(
        cls,
        load: LoadSpec,
        user_rps: float = 0.0,
        arrivals: str | None = None,
        target: LoadTarget | None = None,
    ) -> LocustOptions:
        """The options a scenario's `load` section asks for, at `user_rps` per user, with `arrivals`
        (default: the scenario's first arrival model), sending what `target` says (default: the load
        section's Host header and path over keep-alive connections)."""
        host_header, path = (target.host_header, target.path) if target else (load.host_header, load.path)
        new_connection = target.new_connection if target else False
        arrival = arrivals or load.arrivals[0]
        encoding = (target.accept_encoding if target else None) or load.accept_encoding
        return cls(host_header, path, user_rps, arrival, encoding, new_connection)

    def as_form(self) -> dict[str, str]:
        """The options as the /swarm form fields Locust forwards to the workers (a flag as true/false, as
        Locust's web UI reads it)."""
        return {
            "host_header": self.host_header,
            "request_path": self.request_path,
            "user_rps": f"{self.user_rps:g}",
            "arrivals": self.arrivals,
            "accept_encoding": self.accept_encoding,
            "new_connection": "true" if self.new_connection else "false",
        }

    def as_args(self) -> list[str]:
        """The same options on a Locust command line (a flag only when set)."""
        args: list[str] = []
        for key, value in self.as_form().items():
            flag = f"--{key.replace('_', '-')}"
            if value in ("true", "false") and key in FLAGS:
                args += [flag] if value == "true" else []
            else:
                args += [flag, value]
        return args


@dataclass(frozen=True)
class LoadTarget:
    """Where and how the load generator sends one traffic profile's requests."""

    url: str  # the gateway (https:// for a TLS profile), or the backend itself for the baseline
    host_header: str
    path: str
    new_connection: bool = False
    accept_encoding: str | None = None  # the profile's Accept-Encoding; None: the scenario's (load.accept_encoding)


def locustfile_arg(locustfile: Path) -> str:
    """`-f` value: the locustfile plus the stats and guard extensions that live beside gateway.py."""
    extensions = [str(LOCUSTFILE_DIR / name) for name in (STATS_EXTENSION, GUARD_EXTENSION) if name != locustfile.name]
    return ",".join([str(locustfile), *extensions])


def guard_env(targets: Sequence[str], token: str | None = None) -> dict[str, str]:
    """The environment that closes a Locust to everyone but its run (locustfiles/gateway_sizer_guard.py): load
    only to `targets`; with `token`, commands only from whoever holds it."""
    return {TARGETS_ENV: ",".join(targets), **({TOKEN_ENV: token} if token else {})}


def loop_env() -> dict[str, str]:
    """How Locust's workers wait: the gevent loop backend (GEVENT_BACKEND as the runner was given it, else
    DEFAULT_LOOP) and the paced users' send timer (GATEWAY_SIZER_TIMER, else DEFAULT_TIMER); UsageError for a
    timer locustfiles/fine_timer.py does not know."""
    timer = os.environ.get(TIMER_ENV) or DEFAULT_TIMER
    if timer not in TIMERS:
        raise UsageError(
            f"{TIMER_ENV}={timer!r} is not a send timer",
            f"set it to {' or '.join(TIMERS)}, or unset it (default: {DEFAULT_TIMER})",
        )
    return {LOOP_ENV: os.environ.get(LOOP_ENV) or DEFAULT_LOOP, TIMER_ENV: timer}


def loop_backend(python: str = sys.executable) -> str | None:
    """The loop backend a Locust worker started with loop_env() by `python` on this machine runs on (None: unknown)."""
    probe = "import gevent; print(gevent.get_hub().loop.backend)"
    try:
        done = subprocess.run(
            [python, "-c", probe],
            env={**os.environ, **loop_env()},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def master_args(
    locustfile: str,
    user_class: str,
    host: str,
    options: LocustOptions,
    *,
    web_port: int = WEB_PORT,
    master_port: int = MASTER_PORT,
    web_host: str | None = None,
    bind_host: str | None = None,
) -> list[str]:
    """Locust's arguments for the master: web UI on `web_host:web_port` (all interfaces when None),
    workers connect on `bind_host:master_port`."""
    binds = ["--master-bind-host", bind_host] if bind_host else []
    web = ["--web-host", web_host] if web_host else []
    return [
        "-f",
        locustfile,
        "--master",
        *binds,
        "--master-bind-port",
        str(master_port),
        *web,
        "--web-port",
        str(web_port),
        "--host",
        host,
        "--loglevel",
        LOG_LEVEL,
        *options.as_args(),
        user_class,
    ]


def worker_args(
    locustfile: str, user_class: str, options: LocustOptions, *, master_host: str, master_port: int = MASTER_PORT
) -> list[str]:
    """Locust's arguments for a worker that connects to `master_host:master_port`."""
    return [
        "-f",
        locustfile,
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(master_port),
        "--loglevel",
        LOG_LEVEL,
        *options.as_args(),
        user_class,
    ]


def local_command(args: list[str], python: str = sys.executable) -> list[str]:
    """Locust run as a module of this Python (the local platform's processes)."""
    return [python, "-m", "locust", *args]

"""Everything gateway-sizer knows about Locust: command lines, and the master's HTTP API.

The runner drives Locust's master over the same HTTP endpoints its web UI uses (`/swarm`, `/stop`,
`/stats/requests`), so a person watching the web UI sees the live run. Exact per-window figures come
from the master-side extension in `locustfiles/gateway_sizer_stats.py` (`/gateway-sizer/snapshot`).
The thread that keeps the extension's dead-man switch from tripping is runner.heartbeat's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from runner.errors import LoadGeneratorError, UnreachableError, UsageError
from runner.http import RetryingClient, timeout
from runner.paths import LOCUSTFILE_DIR

if TYPE_CHECKING:
    from runner.scenario import LoadSpec

SNAPSHOT_PATH = "/gateway-sizer/snapshot"
HEARTBEAT_PATH = "/gateway-sizer/heartbeat"  # the dead-man switch (HEARTBEAT_ROUTE there; runner.heartbeat)
STATE_PATH = "/gateway-sizer/state"
CONNECTIONS_PATH = "/gateway-sizer/connections"  # locustfiles/connection_holder.py
PROBE_PATH = "/gateway-sizer/probe"  # locustfiles/route_probe.py
READY_PATH = "/stats/requests"  # the web UI's own stats route: answers once the master is up
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
DEFAULT_TIMER, TIMERS = "fine", ("fine", "gevent")
TOKEN_HEADER = "X-Gateway-Sizer-Token"
WEB_PORT = 8089
MASTER_PORT = 5557
LOG_LEVEL = "WARNING"
# The gateway locustfile's user classes, by the scenario's `load.client`.
USER_CLASSES = {"fasthttp": "FastGatewayUser", "lean": "LeanGatewayUser"}
FLAGS = frozenset({"new_connection"})  # the gateway locustfile's options that are flags, not values
POLL_S = 0.5
# Workers send their counters to the master every second (the stats extension sets Locust's 3 s
# WORKER_REPORT_INTERVAL to this); figures for a second are complete once a report after it has arrived.
WORKER_REPORT_INTERVAL_S = 1.0
REPORT_LAG_S = WORKER_REPORT_INTERVAL_S + 0.5


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
        raise UsageError(f"{TIMER_ENV}={timer!r} is not a send timer",
                         f"set it to {' or '.join(TIMERS)}, or unset it (default: {DEFAULT_TIMER})")  # fmt: skip
    return {LOOP_ENV: os.environ.get(LOOP_ENV) or DEFAULT_LOOP, TIMER_ENV: timer}


def loop_backend(python: str = sys.executable) -> str | None:
    """The loop backend a Locust worker started with loop_env() by `python` on this machine runs on (None: unknown)."""
    probe = "import gevent; print(gevent.get_hub().loop.backend)"
    try:
        done = subprocess.run([python, "-c", probe], env={**os.environ, **loop_env()}, capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip
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


@dataclass(frozen=True)
class WorkerStatus:
    id: str
    state: str
    user_count: int
    cpu_percent: float


@dataclass(frozen=True)
class Snapshot:
    """The master's aggregated counters at one moment (see gateway_sizer_stats.py)."""

    time: float
    state: str
    user_count: int
    requests_per_second: dict[int, int]
    failures_per_second: dict[int, int]
    response_times_ms: dict[int, int]
    workers: tuple[WorkerStatus, ...]
    errors: tuple[dict[str, Any], ...] = field(default=())
    started_at: float = 0.0  # when the master started: a restart resets every counter

    @property
    def loading(self) -> bool:
        """Whether users are running (not stopped, by the runner or by the dead-man switch)."""
        return self.state in ("spawning", "running")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Snapshot:
        return cls(
            time=float(data["time"]),
            state=str(data.get("state", "missing")),
            user_count=int(data.get("user_count", 0)),
            requests_per_second={int(k): int(v) for k, v in data.get("requests_per_second", {}).items()},
            failures_per_second={int(k): int(v) for k, v in data.get("failures_per_second", {}).items()},
            response_times_ms={int(k): int(v) for k, v in data.get("response_times_ms", {}).items()},
            workers=tuple(
                WorkerStatus(str(w["id"]), str(w["state"]), int(w["user_count"]), float(w["cpu_usage"]))
                for w in data.get("workers", [])
            ),
            errors=tuple(data.get("errors", [])),
            started_at=float(data.get("started_at", 0.0)),
        )


@dataclass(frozen=True)
class HeldConnections:
    """What the master's connection holder reports: `held` are open now, after one answer each."""

    state: str  # idle, opening, holding, released
    requested: int
    held: int
    opened: int
    failed: int
    closed_by_peer: int
    refreshed: int
    non_2xx: int
    last_error: str | None
    opening_s: float | None = None

    @property
    def settled(self) -> bool:
        """Every requested connection has been tried (opened or failed)."""
        return self.state != "opening" and self.opened + self.failed >= self.requested

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HeldConnections:
        def count(key: str) -> int:
            return int(data.get(key) or 0)

        opening = data.get("opening_s")
        return cls(
            state=str(data.get("state", "idle")),
            requested=count("requested"),
            held=count("held"),
            opened=count("opened"),
            failed=count("failed"),
            closed_by_peer=count("closed_by_peer"),
            refreshed=count("refreshed"),
            non_2xx=count("non_2xx"),
            last_error=data.get("last_error"),
            opening_s=float(opening) if opening is not None else None,
        )


@dataclass(frozen=True)
class ProbeResult:
    """A route probe: when (the master's wall clock) the first 2xx came, after how many polls."""

    state: str  # idle, running, done, timeout, stopped
    started_at: float | None
    first_2xx_at: float | None
    polls: int
    last_status: int | None
    last_error: str | None

    @property
    def seconds(self) -> float | None:
        """From the probe's start to its first 2xx."""
        if self.first_2xx_at is None or self.started_at is None:
            return None
        return self.first_2xx_at - self.started_at

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeResult:
        def number(key: str) -> float | None:
            value = data.get(key)
            return float(value) if value is not None else None

        status = data.get("last_status")
        return cls(
            state=str(data.get("state", "idle")),
            started_at=number("started_at"),
            first_2xx_at=number("first_2xx_at"),
            polls=int(data.get("polls") or 0),
            last_status=int(status) if status is not None else None,
            last_error=data.get("last_error"),
        )


class LocustMaster:
    """Client of a Locust master's web API (directly, or through the Kubernetes API server's proxy)."""

    def __init__(
        self, base_url: str, session: requests.Session | RetryingClient | None = None, token: str | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = session if isinstance(session, RetryingClient) else RetryingClient(session)
        if token:  # every call carries it: the master obeys only its run (locustfiles/gateway_sizer_guard.py)
            self.client.session.headers[TOKEN_HEADER] = token
        self._beat = self.client.sibling(budget_s=0.0)  # the heartbeat thread's own; a missed beat is just missed

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            response = self.client.request(method, self.base_url + path, **kwargs)
        except requests.RequestException as error:
            raise UnreachableError(
                f"Locust master at {self.base_url} unreachable ({type(error).__name__})",
                "check that the master is running (see its log in the run directory)",
            ) from None
        if response.status_code >= 400:
            message = _message(response)
            raise LoadGeneratorError(
                f"Locust master answered {method} {path} with HTTP {response.status_code}"
                + (f": {message}" if message else "")
            )
        return response

    def stats(self) -> dict[str, Any]:
        return dict(self._call("GET", READY_PATH).json())

    def snapshot(self) -> Snapshot:
        response = self._call("GET", SNAPSHOT_PATH)
        return Snapshot.from_json(response.json())

    def wait_for_workers(self, count: int, timeout_s: float) -> None:
        """Block until `count` workers are connected and ready."""
        deadline = time.monotonic() + timeout_s
        connected = 0
        while time.monotonic() < deadline:
            try:
                connected = int(self.stats().get("worker_count", 0))
            except UnreachableError:
                connected = 0
            if connected >= count:
                return
            time.sleep(POLL_S)
        raise LoadGeneratorError(
            f"only {connected} of {count} Locust workers connected after {timeout_s:.0f} s",
            "see the worker logs in the run directory",
        )

    def swarm(self, users: int, spawn_rate: float, host: str, options: LocustOptions) -> None:
        """Start or change the load: `users` users at `options.user_rps` each (0 = closed loop)."""
        form = {"user_count": str(users), "spawn_rate": f"{spawn_rate:g}", "host": host, **options.as_form()}
        result = self._call("POST", "/swarm", data=form).json()
        if not result.get("success"):
            raise LoadGeneratorError(f"Locust refused to swarm: {result.get('message', result)}")

    def stop(self) -> None:
        self._call("POST", "/stop")

    def hold_connections(
        self, count: int, url: str, host_header: str, *, path: str = "/", refresh_s: float, open_rate: float
    ) -> HeldConnections:
        """Replace whatever the master holds by `count` idle keep-alive connections to `url` (0 releases);
        they open in the background at `open_rate` per second: poll `connections()`."""
        body = {"count": count, "url": url, "host_header": host_header, "path": path, "refresh_s": refresh_s,
                "open_rate": open_rate}  # fmt: skip
        return HeldConnections.from_json(self._call("POST", CONNECTIONS_PATH, json=body).json())

    def connections(self) -> HeldConnections:
        return HeldConnections.from_json(self._call("GET", CONNECTIONS_PATH).json())

    def release_connections(self) -> None:
        self._call("POST", CONNECTIONS_PATH, json={"count": 0})

    def start_probe(self, url: str, host_header: str, *, path: str = "/", timeout_s: float) -> ProbeResult:
        """Poll `url` + `path` with `host_header` from the master until the first 2xx (or `timeout_s`)."""
        body = {"url": url, "host_header": host_header, "path": path, "timeout_s": timeout_s}
        return ProbeResult.from_json(self._call("POST", PROBE_PATH, json=body).json())

    def probe(self) -> ProbeResult:
        return ProbeResult.from_json(self._call("GET", PROBE_PATH).json())

    def heartbeat(self, timeout_s: float, state: dict[str, Any]) -> None:
        """Tell the master the runner is alive; it stops the load after `timeout_s` without one."""
        try:
            response = self._beat.post(
                self.base_url + HEARTBEAT_PATH, json={"timeout_s": timeout_s, "state": state}, timeout=timeout(5.0)
            )
        except requests.RequestException as error:
            raise UnreachableError(
                f"Locust master at {self.base_url} missed a heartbeat ({type(error).__name__})"
            ) from None
        if response.status_code >= 400:
            raise LoadGeneratorError(f"Locust master answered the heartbeat with HTTP {response.status_code}")


def _message(response: requests.Response) -> str | None:
    """The `message` of a JSON error answer from the master-side extension, on one line."""
    try:
        body = response.json()
    except ValueError:
        return None
    message = body.get("message") if isinstance(body, dict) else None
    return " ".join(str(message).split())[:300] if message else None

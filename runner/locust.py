"""Everything gateway-sizer knows about Locust: command lines, and the master's HTTP API.

The runner drives Locust's master over the same HTTP endpoints its web UI uses (`/swarm`, `/stop`,
`/stats/requests`), so a person watching the web UI sees the live run. Exact per-window figures come
from the master-side extension in `locustfiles/gateway_sizer_stats.py` (`/gateway-sizer/snapshot`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from runner.errors import LoadGeneratorError, UnreachableError

if TYPE_CHECKING:
    from runner.scenario import LoadSpec

SNAPSHOT_PATH = "/gateway-sizer/snapshot"
STATS_EXTENSION = "gateway_sizer_stats.py"
WEB_PORT = 8089
MASTER_PORT = 5557
REQUEST_TIMEOUT_S = 10.0
POLL_S = 0.5
# Workers send their counters to the master every 3 s (locust.runners.WORKER_REPORT_INTERVAL); figures
# for a second are complete once a report after it has arrived.
REPORT_LAG_S = 3.5


@dataclass(frozen=True)
class LocustOptions:
    """The gateway locustfile's own options (see locustfiles/gateway.py)."""

    host_header: str
    request_path: str
    user_rps: float = 0.0
    arrivals: str = "synchronized"
    accept_encoding: str = "gzip, deflate, br"

    @classmethod
    def from_load(cls, load: LoadSpec, user_rps: float = 0.0) -> LocustOptions:
        """The options a scenario's `load` section asks for, at `user_rps` per user."""
        return cls(load.host_header, load.path, user_rps, load.arrivals, load.accept_encoding)

    def as_form(self) -> dict[str, str]:
        """The options as the /swarm form fields Locust forwards to the workers."""
        return {
            "host_header": self.host_header,
            "request_path": self.request_path,
            "user_rps": f"{self.user_rps:g}",
            "arrivals": self.arrivals,
            "accept_encoding": self.accept_encoding,
        }

    def as_args(self) -> list[str]:
        """The same options on a Locust command line."""
        return [arg for key, value in self.as_form().items() for arg in (f"--{key.replace('_', '-')}", value)]


def locustfile_arg(locustfile: Path) -> str:
    """`-f` value: the locustfile plus the stats extension that lives beside gateway.py."""
    extension = Path(__file__).resolve().parent.parent / "locustfiles" / STATS_EXTENSION
    return f"{locustfile},{extension}" if locustfile.name != STATS_EXTENSION else str(locustfile)


def master_command(
    locustfile: str,
    user_class: str,
    host: str,
    options: LocustOptions,
    *,
    web_host: str,
    web_port: int,
    master_port: int,
    bind_host: str,
    python: str = sys.executable,
) -> list[str]:
    """The master: web UI on `web_host:web_port`, workers connect on `bind_host:master_port`."""
    return [
        python,
        "-m",
        "locust",
        "-f",
        locustfile,
        "--master",
        "--master-bind-host",
        bind_host,
        "--master-bind-port",
        str(master_port),
        "--web-host",
        web_host,
        "--web-port",
        str(web_port),
        "--host",
        host,
        "--loglevel",
        "WARNING",
        *options.as_args(),
        user_class,
    ]


def worker_command(
    locustfile: str,
    user_class: str,
    options: LocustOptions,
    *,
    master_host: str,
    master_port: int,
    python: str = sys.executable,
) -> list[str]:
    return [
        python,
        "-m",
        "locust",
        "-f",
        locustfile,
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(master_port),
        "--loglevel",
        "WARNING",
        *options.as_args(),
        user_class,
    ]


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
        )


class LocustMaster:
    """Client of a Locust master's web API (directly, or through the Kubernetes API server's proxy)."""

    def __init__(self, base_url: str, session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = session or requests.Session()

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            response = self.session.request(method, self.base_url + path, timeout=REQUEST_TIMEOUT_S, **kwargs)
        except requests.RequestException as error:
            raise UnreachableError(
                f"Locust master at {self.base_url} unreachable ({type(error).__name__})",
                "check that the master is running (see its log in the run directory)",
            ) from None
        if response.status_code >= 400:
            raise LoadGeneratorError(f"Locust master answered {method} {path} with HTTP {response.status_code}")
        return response

    def stats(self) -> dict[str, Any]:
        return dict(self._call("GET", "/stats/requests").json())

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

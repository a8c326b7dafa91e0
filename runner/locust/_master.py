"""The Locust master's HTTP API as gateway-sizer drives it.

The runner drives Locust's master over the same HTTP endpoints its web UI uses (`/swarm`, `/stop`,
`/stats/requests`), so a person watching the web UI sees the live run. Exact per-window figures come
from the master-side extension in `locustfiles/gateway_sizer_stats.py` (`/gateway-sizer/snapshot`).
The thread that keeps the extension's dead-man switch from tripping is runner.heartbeat's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests

from runner.errors import LoadGeneratorError, UnreachableError
from runner.http import RetryingClient, timeout
from runner.locust._command import LocustOptions

SNAPSHOT_PATH = "/gateway-sizer/snapshot"
HEARTBEAT_PATH = "/gateway-sizer/heartbeat"  # the dead-man switch (HEARTBEAT_ROUTE there; runner.heartbeat)
STATE_PATH = "/gateway-sizer/state"
CONNECTIONS_PATH = "/gateway-sizer/connections"  # locustfiles/connection_holder.py
PROBE_PATH = "/gateway-sizer/probe"  # locustfiles/route_probe.py
READY_PATH = "/stats/requests"  # the web UI's own stats route: answers once the master is up
TOKEN_HEADER = "X-Gateway-Sizer-Token"
POLL_S = 0.5
# Workers send their counters to the master every second (the stats extension sets Locust's 3 s
# WORKER_REPORT_INTERVAL to this); figures for a second are complete once a report after it has arrived.
WORKER_REPORT_INTERVAL_S = 1.0
REPORT_LAG_S = WORKER_REPORT_INTERVAL_S + 0.5


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
        body = {
            "count": count,
            "url": url,
            "host_header": host_header,
            "path": path,
            "refresh_s": refresh_s,
            "open_rate": open_rate,
        }
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

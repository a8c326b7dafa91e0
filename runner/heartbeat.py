"""The runner's side of the load's dead-man switch: a thread that tells the Locust master, every
HEARTBEAT_INTERVAL_S, that the runner is alive and what it is measuring. The master's side
(locustfiles/gateway_sizer_stats.py) stops the load after HEARTBEAT_TIMEOUT_S without one, so a runner killed
hard (SIGKILL, out of memory, a lost node) leaves no load running. The call itself is
runner.locust.LocustMaster.heartbeat.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from runner.errors import PlatformError, one_line

HEARTBEAT_INTERVAL_S = 2.0
# Silence after which the master stops the load: longer than a call's retry budget (runner.http), so a
# run riding out a 30 s API server outage keeps its load, and a runner killed hard leaves none for long.
HEARTBEAT_TIMEOUT_S = 60.0  # sent with every heartbeat; locustfiles/gateway_sizer_stats.py acts on it
NEVER_HEARD_BEATS = 3  # heartbeats missed before any arrived: the dead-man switch is not armed


class Heartbeat:
    """While open, tells the Locust master every HEARTBEAT_INTERVAL_S that the runner is alive, with what
    `state()` returns (a daemon thread). A runner killed hard stops beating, and the master stops the load."""

    def __init__(
        self,
        master: HeartbeatTarget,
        state: Callable[[], dict[str, Any]] = dict,
        *,
        interval_s: float = HEARTBEAT_INTERVAL_S,
        timeout_s: float = HEARTBEAT_TIMEOUT_S,
    ) -> None:
        self.master, self.state, self.interval_s, self.timeout_s = master, state, interval_s, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gateway-sizer-heartbeat", daemon=True)
        self.sent = self.missed = 0
        self.last_error: str | None = None

    def _run(self) -> None:
        while True:
            try:
                self.master.heartbeat(self.timeout_s, self.state())
                self.sent += 1
            except Exception as error:
                self.missed += 1  # the master waits timeout_s before acting
                self.last_error = (one_line(str(error)) or type(error).__name__)[:200]
            if self._stop.wait(self.interval_s):
                return

    def check(self) -> None:
        """PlatformError when no heartbeat has reached the master in NEVER_HEARD_BEATS tries: the dead-man
        switch is not armed, so a runner killed hard would leave the load running."""
        if self.sent == 0 and self.missed >= NEVER_HEARD_BEATS:
            raise PlatformError(
                f"the Locust master has received none of {self.missed} heartbeats ({self.last_error}): "
                "a runner killed hard would leave its load running",
                "check that the runner reaches the master's web API (its URL, credentials, CA)",
            )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 10)


class HeartbeatTarget(Protocol):
    def heartbeat(self, timeout_s: float, state: dict[str, Any]) -> None: ...

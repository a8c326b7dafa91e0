"""The heartbeat that arms the Locust master's dead-man switch: a run whose heartbeats never arrive stops
measuring instead of holding load that a runner killed hard would leave behind."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runner.errors import PlatformError
from runner.heartbeat import NEVER_HEARD_BEATS, Heartbeat


class _Master:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.states: list[dict[str, Any]] = []

    def heartbeat(self, timeout_s: float, state: dict[str, Any]) -> None:
        if self.error is not None:
            raise self.error
        self.states.append(state)


def _beats(master: _Master) -> Heartbeat:
    heartbeat = Heartbeat(master, lambda: {"phase": "measure"}, interval_s=0.01)
    deadline = time.monotonic() + 5
    with heartbeat:
        while heartbeat.sent + heartbeat.missed < NEVER_HEARD_BEATS + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    return heartbeat


def test_heartbeats_that_never_arrive_stop_the_measuring_with_the_reason():
    heartbeat = _beats(_Master(OSError("certificate verify failed:\nunable to get local issuer")))
    with pytest.raises(PlatformError) as stopped:
        heartbeat.check()
    line = stopped.value.one_line()
    assert "none of" in line and "certificate verify failed:\\nunable" in line and "killed hard" in line, line


def test_arriving_heartbeats_pass_the_check_even_after_later_misses():
    master = _Master(None)
    heartbeat = _beats(master)
    heartbeat.check()
    assert master.states and master.states[0] == {"phase": "measure"}
    master.error = OSError("gone")  # the master restarted: misses after arrivals are the switch's business
    heartbeat.missed += NEVER_HEARD_BEATS
    heartbeat.check()

"""Waiting for an event instead of sleeping: look until what is seen is ready, fail at a deadline naming what
was waited for and what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

POLL_S = 0.25  # between two looks: short against every deadline here, long against a look's cost

T = TypeVar("T")


def until(
    look: Callable[[], T],
    deadline_s: float,
    what: str,
    *,
    ready: Callable[[T], object] = bool,
    poll_s: float = POLL_S,
) -> T:
    """The first value `look()` returns that is `ready` (by default: true), looked at every `poll_s`;
    AssertionError naming `what` and the last value seen when none is within `deadline_s` seconds."""
    deadline = time.monotonic() + deadline_s
    while not ready(seen := look()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {deadline_s:g} s for {what}; last saw {seen!r}")
        time.sleep(poll_s)
    return seen

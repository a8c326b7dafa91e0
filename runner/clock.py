"""Time as the engine sees it: wall-clock seconds (to line windows up with Prometheus and Locust), a
monotonic clock for deadlines, and sleep. Injected, so the engine runs on simulated time in tests."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (the timestamps Prometheus and Locust use)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()

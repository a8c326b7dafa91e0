"""Sleeps that end on time, to the tens of microseconds: one timerfd per worker process, watched by gevent's hub.

gevent's default loop (libev on epoll) waits in whole milliseconds: epoll_wait takes its timeout in ms, so every
user whose next request falls due within one millisecond wakes at its end, and they all send at once. Locust's
Poisson arrivals then reach Envoy in clusters (bench/send_clustering.py, 2026-11-26: 27-37% of gaps under 50 us
where a Poisson stream has 6-10%; index of dispersion in 1 ms bins 1.37-1.56), and Envoy serves a cluster for
less CPU per request (0.78-0.92 of the Go generator's Poisson stream), so the knee came out higher than real
clients would give it. libev's io_uring backend times to the microsecond but aborted Locust's workers under
load; this module keeps the epoll loop and gives it a precise alarm instead: a timerfd (CLOCK_MONOTONIC, the
clock `time.monotonic` reads) armed at the earliest due time, whose readiness wakes epoll when it fires.

`FineTimer.sleep_until(due)` blocks the calling greenlet until `due`; a kill (Locust stopping a waiting user)
ends the wait as it ends gevent.sleep. `GATEWAY_SIZER_TIMER=gevent` in a worker's environment makes
`sleep_until` plain gevent.sleep (to compare the two in one run: bench/send_clustering.py --timers).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import heapq
import itertools
import os
import time

import gevent
from gevent.hub import Waiter, get_hub

TIMER_ENV = "GATEWAY_SIZER_TIMER"
TIMERS = ("fine", "gevent")
CLOCK_MONOTONIC = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC
TFD_TIMER_ABSTIME = 1
READ = 1  # libev's EV_READ
SLACK_S = 20e-6  # waiters due this close after a wake-up go with it (the wake-up itself is late by about this)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    return libc


class FineTimer:
    """A heap of sleeping greenlets and one timerfd armed at the earliest of them (one per process)."""

    def __init__(self) -> None:
        self._libc = _libc()
        self._fd = self._libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), f"timerfd_create: {os.strerror(ctypes.get_errno())}")
        self._heap: list[list] = []  # [due, sequence, waiter or None once woken or killed]
        self._sequence = itertools.count()
        self._armed = float("inf")  # the due time the timerfd is set to
        self._spec = _Itimerspec()
        self._watcher = get_hub().loop.io(self._fd, READ)
        self._watcher.start(self._fire)

    def sleep_until(self, due: float) -> None:
        """Block this greenlet until time.monotonic() reaches `due` (yield once when it already has)."""
        if due - time.monotonic() <= SLACK_S:
            gevent.sleep(0)
            return
        entry = [due, next(self._sequence), Waiter()]
        heapq.heappush(self._heap, entry)
        if due < self._armed:
            self._arm(due)
        try:
            entry[2].get()
        finally:
            entry[2] = None  # woken, or killed while waiting: either way nobody to wake any more

    def _arm(self, due: float) -> None:
        seconds = int(due)
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = seconds, int((due - seconds) * 1e9)
        if self._libc.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) != 0:
            raise OSError(ctypes.get_errno(), f"timerfd_settime: {os.strerror(ctypes.get_errno())}")
        self._armed = due

    def _fire(self) -> None:
        """The hub's callback when the timerfd fires: wake every waiter due by now, arm for the next one."""
        with contextlib.suppress(BlockingIOError):  # re-armed after it fired and before this ran: not expired now
            os.read(self._fd, 8)
        self._armed = float("inf")
        heap = self._heap
        while heap and heap[0][0] <= time.monotonic() + SLACK_S:
            waiter = heapq.heappop(heap)[2]
            if waiter is not None:
                waiter.switch(None)  # runs the user until it blocks again (it may push a new entry)
        if heap and heap[0][0] < self._armed:
            self._arm(heap[0][0])


def timer_in_use() -> str:
    """The send timer this process's paced users wait on: GATEWAY_SIZER_TIMER, else fine."""
    return os.environ.get(TIMER_ENV) or TIMERS[0]


_COARSE = timer_in_use() == "gevent"  # read once: a worker's environment does not change while it runs
_TIMER: FineTimer | None = None


def sleep_until(due: float) -> None:
    """Sleep until time.monotonic() reaches `due`: on this process's FineTimer, or gevent.sleep when the
    environment says GATEWAY_SIZER_TIMER=gevent."""
    global _TIMER
    if _COARSE:
        gevent.sleep(max(0.0, due - time.monotonic()))
        return
    if _TIMER is None:
        _TIMER = FineTimer()
    _TIMER.sleep_until(due)

"""Paced users wait on locustfiles/fine_timer.py: a timerfd wakes each on time, where gevent.sleep on libev's epoll
loop wakes every user due within a millisecond at its end, and they send in clusters (docs/measurements.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from runner.errors import UsageError
from runner.locust import DEFAULT_TIMER, TIMER_ENV, TIMERS, loop_env
from runner.paths import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "locustfiles"))
import fine_timer


def _probe(timer: str, *args: str) -> dict:
    env = {**os.environ, TIMER_ENV: timer, "PYTHONPATH": str(PROJECT_ROOT / "tests"), "GEVENT_BACKEND": "epoll"}
    done = subprocess.run([sys.executable, "-m", "support.timer_probe", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.nightly  # how far apart wake-ups land: a timing, moved by a busy machine (bench/send_clustering.py)
def test_users_wake_on_time_and_apart_where_gevent_sleep_wakes_them_together():
    # 200 users on one Poisson schedule of 1,000 wake-ups a second, each timer in turn, twice (the order turned):
    # the figures compare the two timers in one run on one machine, none is an absolute bound
    runs = {timer: [] for timer in ("fine", "gevent")}
    for order in (("fine", "gevent"), ("gevent", "fine")):
        for timer in order:
            runs[timer].append(_probe(timer, "poisson", "1000", "2"))
    for fine, coarse in zip(runs["fine"], runs["gevent"], strict=True):
        assert fine["wakes"] == coarse["wakes"] > 1500, (fine, coarse)
        assert fine["earliest_us"] <= fine_timer.SLACK_S * 1e6, fine  # due within SLACK_S of a wake-up go with it
        assert fine["late_median_us"] < coarse["late_median_us"] / 3, (fine, coarse)  # gevent: ~0.6 ms, fine: ~60 us
        # a Poisson stream of 1,000/s has 4.9% of its gaps under 50 us; wake-ups on millisecond ticks have far more
        assert fine["gaps_under_50us"] < coarse["gaps_under_50us"] / 2, (fine, coarse)
        assert fine["dispersion_1ms"] < coarse["dispersion_1ms"], (fine, coarse)


@pytest.mark.nightly  # on time: a timing, moved by a busy machine
def test_a_sleeper_killed_while_it_waits_leaves_the_others_on_time():
    # Locust stops a waiting user by killing its greenlet: the timer must not wake it, nor lose the ones after it
    seen = _probe("fine", "kill")
    assert seen["woke"] == [1, 3, 5, 7, 9], seen
    assert seen["late_ms"] < 20, seen  # each within the 10 ms between two sleepers' due times


def test_workers_get_the_fine_timer_unless_told_otherwise(monkeypatch):
    assert fine_timer.TIMER_ENV == TIMER_ENV and fine_timer.TIMERS == TIMERS and DEFAULT_TIMER == "fine"
    monkeypatch.delenv(TIMER_ENV, raising=False)
    assert loop_env()[TIMER_ENV] == "fine"
    monkeypatch.setenv(TIMER_ENV, "gevent")
    assert loop_env()[TIMER_ENV] == "gevent"
    monkeypatch.setenv(TIMER_ENV, "fast")
    with pytest.raises(UsageError, match="GATEWAY_SIZER_TIMER='fast' is not a send timer"):
        loop_env()

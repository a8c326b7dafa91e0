"""The gevent loop Locust's workers run on (runner.locust.loop_env): epoll unless GEVENT_BACKEND says otherwise."""

from __future__ import annotations

from runner.locust import DEFAULT_LOOP, LOOP_ENV, loop_backend, loop_env


def test_workers_run_on_epoll_by_default(monkeypatch):
    # libev's io_uring backend aborted Locust workers under a sweep's load (docs/measurements.md, "gevent's loop")
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert loop_env()[LOOP_ENV] == DEFAULT_LOOP == "epoll"
    assert loop_backend() == "epoll"


def test_a_backend_the_user_gives_is_kept_and_is_what_a_worker_runs_on(monkeypatch):
    monkeypatch.setenv(LOOP_ENV, "poll")
    assert loop_env()[LOOP_ENV] == "poll"
    assert loop_backend() == "poll"

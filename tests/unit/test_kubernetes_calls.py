"""API calls ride out a paused API server: transient failures are retried inside the budget, others not."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.rest import ApiException

from runner.errors import UnreachableError, UsageError
from runner.platforms.kubernetes import connection
from runner.platforms.kubernetes.connection import ApiBusyError, ConflictError, call


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(connection.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(connection.time, "sleep", fake.sleep)
    return fake


def _failing(failures: list[BaseException], clock: FakeClock, attempt_s: float = 10.0):
    """A client method that raises each of `failures` in turn (each after `attempt_s`), then answers."""

    def method(*args: object, _request_timeout: float) -> str:
        assert _request_timeout == connection.REQUEST_TIMEOUT_S
        clock.now += attempt_s
        if failures:
            raise failures.pop(0)
        return "answer"

    return method


def _timeout() -> urllib3.exceptions.ReadTimeoutError:
    return urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out")


def test_a_30_s_outage_is_ridden_out(clock):
    # three 10 s timeouts, then the API server is back: 30 s of silence plus the backoff
    assert call("read", _failing([_timeout(), _timeout(), _timeout()], clock)) == "answer"
    assert clock.sleeps == [0.5, 1.0, 2.0] and clock.now <= connection.RETRY_BUDGET_S


def test_busy_answers_are_retried_too(clock):
    busy = [ApiException(status=503, reason="Service Unavailable"), ApiException(status=429, reason="Too Many")]
    assert call("read", _failing(busy, clock, attempt_s=0.1)) == "answer"


def test_an_outage_longer_than_the_budget_is_one_line(clock):
    with pytest.raises(UnreachableError, match=r"Kubernetes API unreachable while trying to read \(ReadTimeout"):
        call("read", _failing([_timeout() for _ in range(10)], clock))
    assert clock.now <= connection.RETRY_BUDGET_S + connection.REQUEST_TIMEOUT_S


@pytest.mark.parametrize(
    ("status", "raised"), [(403, UsageError), (409, ConflictError), (422, connection.PlatformError)]
)
def test_answers_that_will_not_change_are_not_retried(clock, status, raised):
    with pytest.raises(raised):
        call("write", _failing([ApiException(status=status, reason="no")], clock, attempt_s=0.1))
    assert clock.sleeps == []
    assert not issubclass(raised, ApiBusyError)

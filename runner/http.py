"""HTTP calls to the services a run depends on (Prometheus, Locust's master, the API server's proxy): every
call has a client-side timeout, and transient failures are retried with backoff inside a time budget.

Transient: a refused or dropped connection, a timeout, a 502/503/504 answer, and a 401 when the caller can
refresh its credentials (an expired token). Retries back off 0.5 s, 1 s, 2 s, ... up to MAX_BACKOFF_S, and
stop once the next one would start after the budget (RETRY_BUDGET_S, long enough to ride out a 30 s API
server restart); then the last failure is returned or raised to the caller, which names it in one line.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import requests

TIMEOUT_S = 10.0  # per attempt, to read an answer
CONNECT_TIMEOUT_S = 3.0
RETRY_BUDGET_S = 45.0
BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0
RETRY_STATUSES = frozenset({502, 503, 504})
REDACTED = "REDACTED"  # what replaces a URL's userinfo in messages and saved files


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its userinfo, and the (user, password) it carried (None when it had none)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))


def redact_url(url: str) -> str:
    """`url` with its userinfo (user and password) replaced by REDACTED: for messages and saved files."""
    bare, credentials = split_credentials(url)
    if credentials is None:
        return url
    parts = urllib.parse.urlsplit(bare)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{REDACTED}@{parts.netloc}"))


def is_redacted(url: str) -> bool:
    """Whether `url` is one whose credentials redact_url() removed."""
    return split_credentials(url)[1] == (REDACTED, "")


def timeout(read_s: float = TIMEOUT_S) -> tuple[float, float]:
    """The (connect, read) timeout every call passes."""
    return (min(CONNECT_TIMEOUT_S, read_s), read_s)


class RetryingClient:
    """A requests session whose calls retry transient failures inside `budget_s` (see the module's docstring).

    `refresh` renews the session's credentials after a 401 (a bearer token that expired)."""

    def __init__(
        self,
        session: requests.Session | None = None,
        *,
        budget_s: float = RETRY_BUDGET_S,
        refresh: Callable[[requests.Session], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session or requests.Session()
        self.budget_s = budget_s
        self.refresh = refresh
        self._sleep = sleep
        self._monotonic = monotonic

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", timeout())
        deadline = self._monotonic() + self.budget_s
        delay = BACKOFF_S
        while True:
            try:
                response = self.session.request(method, url, **kwargs)
                if response.status_code == 401 and self.refresh is not None:
                    self.refresh(self.session)
                elif response.status_code not in RETRY_STATUSES:
                    return response
                failure: requests.Response | requests.RequestException = response
            except (requests.ConnectionError, requests.Timeout) as error:
                failure = error
            if self._monotonic() + delay > deadline:
                if isinstance(failure, requests.Response):
                    return failure
                raise failure
            self._sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def sibling(self, budget_s: float) -> RetryingClient:
        """A client with its own session carrying the same credentials (and `refresh`), for another thread:
        a requests.Session is not safe to share while a 401 refresh rewrites its headers."""
        session = requests.Session()
        session.headers.update(self.session.headers)
        session.auth, session.cert, session.verify = self.session.auth, self.session.cert, self.session.verify
        session.proxies.update(self.session.proxies)
        # with trust_env, REQUESTS_CA_BUNDLE would replace a cluster's CA in `verify` (see Cluster.session)
        session.trust_env = self.session.trust_env
        return RetryingClient(
            session, budget_s=budget_s, refresh=self.refresh, sleep=self._sleep, monotonic=self._monotonic
        )

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", url, **kwargs)

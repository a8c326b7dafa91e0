"""RetryingClient.sibling: another thread's client with the same credentials and its own session."""

from __future__ import annotations

import requests

from runner.http import RetryingClient


def test_a_sibling_carries_the_credentials_in_a_session_of_its_own():
    session = requests.Session()
    session.headers["Authorization"] = "Bearer old"
    session.verify = "/etc/ca.pem"
    refreshed: list[requests.Session] = []
    parent = RetryingClient(session, refresh=refreshed.append)
    child = parent.sibling(budget_s=0.0)
    assert child.session is not session and child.budget_s == 0.0
    assert child.session.headers["Authorization"] == "Bearer old" and child.session.verify == "/etc/ca.pem"
    child.session.headers["Authorization"] = "Bearer new"  # a refresh in one thread leaves the other's alone
    assert session.headers["Authorization"] == "Bearer old"
    assert child.refresh is parent.refresh

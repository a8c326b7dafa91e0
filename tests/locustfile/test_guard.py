"""A Locust closed to everyone but its run (locustfiles/gateway_sizer_guard.py): a real master and worker, as the
platforms start them, in front of two real nginx servers, the run's target and a foreign one, both on loopback.
Nothing may reach the foreign one, whatever the master's web API is asked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from runner.errors import LoadGeneratorError
from runner.locust import (
    READY_PATH,
    TOKEN_HEADER,
    LoadTarget,
    LocustMaster,
    LocustOptions,
    guard_env,
)
from runner.platforms.kubernetes.gateway_check import fetch
from runner.platforms.local.processes import Supervisor
from support.lean_client import LOCUSTFILE, START_TIMEOUT_S, NginxBackend
from support.locust_pair import FETCHING, start_master, worker_command
from support.processes import alive
from support.wait import until

pytestmark = [pytest.mark.slow, pytest.mark.parallel_safe]
TOKEN = "a-token-only-the-run-holds"
OPTIONS = LocustOptions("external.nginx", "/", user_rps=20.0)  # 2 users: 40 RPS at most, for seconds
SERVED_WITHIN_S = 10.0


@pytest.fixture
def locust(tmp_path: Path) -> Iterator[Callable[..., tuple[str, Path]]]:
    """Starts a master and one worker with the guard's environment; returns the web URL and the worker's log."""
    supervisor = Supervisor(tmp_path / "locust-logs")

    def start(master_env: dict[str, str], worker_env: dict[str, str], host: str) -> tuple[str, Path]:
        master = start_master(supervisor, master_env, host, OPTIONS, files=FETCHING)
        worker = supervisor.start("locust-worker", worker_command(master, OPTIONS), env=worker_env,
                                  cwd=LOCUSTFILE.parent)  # fmt: skip
        LocustMaster(master.url).wait_for_workers(1, START_TIMEOUT_S)
        return master.url, worker.log_path

    yield start
    pids = [p.pid for p in supervisor.processes]
    supervisor.stop_all()
    assert not alive(pids), f"Locust left running: {alive(pids)}"


def _served(backend: NginxBackend, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if backend.connections() > 0:
            return True
        time.sleep(0.2)
    return False


def test_the_master_takes_commands_with_the_runs_token_only_and_sends_nowhere_else(locust, nginx_factory):
    target, foreign = nginx_factory(), nginx_factory()
    closed = guard_env([target.url], TOKEN)
    url, _ = locust(closed, guard_env([target.url]), target.url)
    runner, stranger = LocustMaster(url, token=TOKEN), LocustMaster(url)
    # anyone may read: the web UI through a port-forward
    assert requests.get(url + "/", timeout=5).status_code == 200
    assert requests.get(url + READY_PATH, timeout=5).json()["state"] == "ready"
    # nobody without the token starts, stops or points anything
    with pytest.raises(LoadGeneratorError, match=f"HTTP 403: refused: .*{TOKEN_HEADER}"):
        stranger.swarm(2, 10, target.url, OPTIONS)
    with pytest.raises(LoadGeneratorError, match="HTTP 403"):
        stranger.hold_connections(5, target.url, "external.nginx", refresh_s=25, open_rate=100)
    wrong = requests.post(url + "/swarm", data={"user_count": "2", "spawn_rate": "10", "host": target.url},
                          headers={TOKEN_HEADER: "guessed"}, timeout=5)  # fmt: skip
    assert wrong.status_code == 403
    # the run's own token cannot point the load, held connections or a probe anywhere else either
    with pytest.raises(LoadGeneratorError, match=f"HTTP 403: refused: .*not to '{foreign.url}'"):
        runner.swarm(2, 10, foreign.url, OPTIONS)
    with pytest.raises(LoadGeneratorError, match="HTTP 403: refused"):
        runner.hold_connections(5, foreign.url, "external.nginx", refresh_s=25, open_rate=100)
    with pytest.raises(LoadGeneratorError, match="HTTP 403: refused"):
        runner.start_probe(foreign.url, "external.nginx", timeout_s=2)
    with pytest.raises(LoadGeneratorError, match="HTTP 403 refused"):
        fetch(runner, LoadTarget(foreign.url, "external.nginx", "/"))
    with pytest.raises(LoadGeneratorError, match="HTTP 403 refused"):
        fetch(stranger, LoadTarget(target.url, "external.nginx", "/"))
    # Locust's /user parses its body as JSON whatever the Content-Type says: so does the guard
    plain = requests.post(url + "/user", data=f'{{"user_class_name": "LeanGatewayUser", "host": "{foreign.url}"}}',
                          headers={TOKEN_HEADER: TOKEN, "Content-Type": "text/plain"}, timeout=5)  # fmt: skip
    assert plain.status_code == 403, plain.text
    # a token header with a character outside ASCII is refused like any other wrong token, not a server error
    odd = requests.post(url + "/stop", headers={TOKEN_HEADER: "jeton-é"}, timeout=5)
    assert odd.status_code == 403, odd.text
    assert runner.stats()["state"] == "ready" and foreign.connections() == 0 and target.connections() == 0
    # every call of the run's client carries the token, the platform's checks through the master too
    assert fetch(runner, LoadTarget(target.url, "external.nginx", "/")).status == 200
    # and the run itself drives it
    runner.swarm(2, 10, target.url, OPTIONS)
    try:
        assert _served(target, SERVED_WITHIN_S)
    finally:
        runner.stop()
    assert foreign.connections() == 0


def test_a_worker_refuses_a_spawn_for_another_host_whatever_its_master_says(locust, nginx_factory):
    # a master without the targets check (say, one started by hand with the token only): the worker alone
    # keeps the load on the run's target
    target, foreign = nginx_factory(), nginx_factory()
    url, worker_log = locust(guard_env([], TOKEN), guard_env([target.url]), target.url)
    runner = LocustMaster(url, token=TOKEN)
    runner.swarm(2, 10, foreign.url, OPTIONS)  # the master passes it on
    try:
        refused = f"not to '{foreign.url}'"
        until(worker_log.read_text, SERVED_WITHIN_S, "the worker's refusal in its log", ready=lambda t: refused in t)
        assert foreign.connections() == 0
        # the worker still serves its run; a user it had spawned for the foreign host despite the refusal would
        # have connected by the time its run's users are served (checked again at the end)
        runner.swarm(2, 10, target.url, OPTIONS)
        assert _served(target, SERVED_WITHIN_S)
    finally:
        runner.stop()
    assert foreign.connections() == 0

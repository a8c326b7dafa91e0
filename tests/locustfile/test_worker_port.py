"""A stranger on the Locust master's worker port (5557) gets nothing and gives nothing (issue 31 item 7): a real
master and the run's worker as the kubernetes platform starts them (the workers' host name given to the master),
then mid-run a stranger worker, a real Locust worker process in a UTS namespace of its own under another host name,
connects. Locust alone registers it, hands it users taken from the run's worker and merges what it sends; the
master's guard drops its every message. Needs root (unshare --uts)."""

from __future__ import annotations

import os
import shlex
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.locust import LocustMaster, LocustOptions, guard_env
from runner.platforms.kubernetes.worker_port import WORKER_HOST_ENV
from runner.platforms.local.processes import Supervisor, wait_until
from support.lean_client import LOCUSTFILE, START_TIMEOUT_S
from support.locust_pair import start_master, worker_command
from support.processes import alive

pytestmark = [pytest.mark.slow, pytest.mark.parallel_safe]
OPTIONS = LocustOptions("external.nginx", "/", user_rps=5.0)  # 4 users: 20 RPS at most
USERS = 4
STRANGER = "stranger-pod"
STRANGER_WAIT_S = 8.0  # a worker connects and reports within 1-3 s; its heartbeats come every second


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    if os.geteuid() != 0:
        pytest.fail("the stranger worker runs in a UTS namespace of its own (unshare --uts): run as root")
    processes = Supervisor(tmp_path / "locust-logs")
    yield processes
    pids = [p.pid for p in processes.processes]
    processes.stop_all()
    assert not alive(pids), f"Locust left running: {alive(pids)}"


def test_a_stranger_worker_connecting_mid_run_gets_no_users_and_is_not_counted(supervisor, nginx_factory):
    target = nginx_factory()
    run_host = socket.gethostname()  # the run's worker runs here, under this machine's host name
    master = start_master(supervisor, {**guard_env([target.url], "token"), WORKER_HOST_ENV: run_host}, target.url,
                          OPTIONS)  # fmt: skip
    worker = worker_command(master, OPTIONS)
    supervisor.start("locust-worker", worker, env=guard_env([target.url]), cwd=LOCUSTFILE.parent)
    runner = LocustMaster(master.url, token="token")
    runner.wait_for_workers(1, START_TIMEOUT_S)
    runner.swarm(USERS, 100, target.url, OPTIONS)
    try:
        wait_until(lambda: runner.stats()["user_count"] == USERS, what="the run's users", timeout_s=START_TIMEOUT_S)
        # mid-run, a stranger: any pod that reaches the port, running a plain Locust worker
        hostname = f"hostname {STRANGER} && exec " + shlex.join(worker)
        stranger = supervisor.start("stranger", ["unshare", "--uts", "sh", "-c", hostname], cwd=LOCUSTFILE.parent)
        time.sleep(STRANGER_WAIT_S)
        assert stranger.popen.poll() is None, stranger.log_path.read_text()[-2000:]
        stats, snapshot = runner.stats(), runner.snapshot()
        assert stats["worker_count"] == 1, stats["workers"]
        assert [w.id.rsplit("_", 1)[0] for w in snapshot.workers] == [run_host]
        assert [w.user_count for w in snapshot.workers] == [USERS]  # none taken from the run's worker
        assert f"dropped the messages of Locust worker {STRANGER}_" in master.process.log_path.read_text()
    finally:
        runner.stop()

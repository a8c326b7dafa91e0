"""A real Locust master and workers on loopback, started as the platforms start them, for the tests of what the
master's and the workers' extensions let through (locustfiles/gateway_sizer_guard.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from runner.locust import READY_PATH, LocustOptions, locustfile_arg, master_args, worker_args
from runner.platforms.local.processes import ManagedProcess, Supervisor, free_port, http_ok, wait_until
from support.lean_client import LOCUSTFILE, START_TIMEOUT_S

FILES = locustfile_arg(LOCUSTFILE)
FETCHING = f"{FILES},{LOCUSTFILE.parent / 'gateway_sizer_fetch.py'}"  # as the kubernetes platform's master
USER_CLASS = "LeanGatewayUser"


@dataclass
class Master:
    url: str
    port: int  # its worker port
    process: ManagedProcess


def start_master(supervisor: Supervisor, env: dict[str, str], host: str, options: LocustOptions,
                 files: str = FILES) -> Master:  # fmt: skip
    """A master with `env`, its web API and worker port on loopback, waited for until it answers."""
    web_port, master_port = free_port(), free_port()
    args = master_args(files, USER_CLASS, host, options, web_port=web_port, master_port=master_port,
                       web_host="127.0.0.1", bind_host="127.0.0.1")  # fmt: skip
    process = supervisor.start("locust-master", [sys.executable, "-m", "locust", *args], env=env,
                               cwd=LOCUSTFILE.parent)  # fmt: skip
    url = f"http://127.0.0.1:{web_port}"
    wait_until(http_ok(url + READY_PATH), what="Locust master", timeout_s=START_TIMEOUT_S, process=process)
    return Master(url, master_port, process)


def worker_command(master: Master, options: LocustOptions) -> list[str]:
    """The command line of a worker of `master` (the run's, or a stranger's)."""
    args = worker_args(FILES, USER_CLASS, options, master_host="127.0.0.1", master_port=master.port)
    return [sys.executable, "-m", "locust", *args]

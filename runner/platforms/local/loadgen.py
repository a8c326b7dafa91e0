"""The local test bed's Locust: a master (the web UI the runner drives) and its workers, each in a cgroup of its
own (pods locust-master and locust-worker-<i>), started again when one dies. The Kubernetes platform runs the
same in pods (runner.platforms.kubernetes.loadgen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.errors import LoadGeneratorError
from runner.locust import (
    READY_PATH,
    LocustMaster,
    LocustOptions,
    guard_env,
    local_command,
    locustfile_arg,
    loop_env,
    master_args,
    worker_args,
)
from runner.platforms.local.cgroups import Limits
from runner.platforms.local.layout import BACKEND_NAMESPACE, LOOPBACK, MASTER_POD, NOFILE, START_TIMEOUT_S, WORKER_POD
from runner.platforms.local.processes import ManagedProcess, http_ok, nofile_limit, wait_until


@dataclass(frozen=True)
class LocustSetup:
    """How the test bed runs Locust."""

    locustfile: Path
    user_class: str
    options: LocustOptions
    workers: int
    worker_cpu_cores: float | None = None  # each worker's CFS quota; None: none


@dataclass
class LocalLocust:
    """One setup's master and workers. `run(pod, namespace, container, argv, **options)` starts a process in the
    pod's cgroup and `remove(pod)` stops it and removes the cgroup (the test bed's); the master serves its web UI
    at `web_url` (port `web_port`) and takes workers on `master_port`; users target `gateway_url`, and neither
    the master nor a worker sends to anything but `targets` (locustfiles/gateway_sizer_guard.py)."""

    setup: LocustSetup
    run: Callable[..., ManagedProcess]
    remove: Callable[[str], None]
    gateway_url: str
    web_url: str
    web_port: int
    master_port: int
    targets: tuple[str, ...]

    def start(self, timeout_s: float, on_shortfall: Callable[[], None]) -> LocustMaster:
        """The master and every worker; waits up to `timeout_s` for them all (`on_shortfall` first, when they
        do not all come: a worker that died says more than the count)."""
        self._start_master()
        for index in range(self.setup.workers):
            self._start_worker(index)
        client = LocustMaster(self.web_url)
        try:
            client.wait_for_workers(self.setup.workers, timeout_s)
        except LoadGeneratorError:
            on_shortfall()
            raise
        return client

    def restart(self, dead: list[str], timeout_s: float, on_shortfall: Callable[[], None]) -> None:
        """Start again what of it is among the `dead` pods (already removed): a dead master with every worker,
        else the dead workers."""
        if MASTER_POD in dead:
            for index in range(self.setup.workers):
                self.remove(f"{WORKER_POD}-{index}")  # workers wait on the old master: start them again
            self.start(timeout_s, on_shortfall)
        elif any(name.startswith(WORKER_POD) for name in dead):
            for name in dead:
                if name.startswith(WORKER_POD):
                    self._start_worker(int(name.rsplit("-", 1)[1]))
            LocustMaster(self.web_url).wait_for_workers(self.setup.workers, timeout_s)

    def stop(self) -> None:
        """Stop every worker, then the master, and remove their cgroups."""
        for index in range(self.setup.workers):
            self.remove(f"{WORKER_POD}-{index}")
        self.remove(MASTER_POD)

    def _start_master(self) -> None:
        setup = self.setup
        args = master_args(
            locustfile_arg(setup.locustfile),
            setup.user_class,
            self.gateway_url,
            setup.options,
            web_host=LOOPBACK,
            web_port=self.web_port,
            master_port=self.master_port,
            bind_host=LOOPBACK,
        )
        master = self.run(
            MASTER_POD,
            BACKEND_NAMESPACE,
            "locust",
            local_command(args),
            cwd=setup.locustfile.parent,
            nofile=nofile_limit(NOFILE),
            env=guard_env(self.targets),
        )
        ready = http_ok(f"{self.web_url}{READY_PATH}")
        wait_until(ready, what="Locust master", timeout_s=START_TIMEOUT_S, process=master)

    def _start_worker(self, index: int) -> None:
        setup = self.setup
        files = locustfile_arg(setup.locustfile)
        args = worker_args(files, setup.user_class, setup.options, master_host=LOOPBACK, master_port=self.master_port)
        env = {**guard_env(self.targets), **loop_env()}
        self.run(
            f"{WORKER_POD}-{index}",
            BACKEND_NAMESPACE,
            "locust",
            local_command(args),
            cwd=setup.locustfile.parent,
            limits=Limits(cpu_cores=setup.worker_cpu_cores),
            env=env,
        )

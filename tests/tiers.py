"""`make test`: the suite in tiers, one pytest run each, and a table of how long each took.

The tiers that measure CPU (the local platform's real sweeps, the one-machine cluster) run one test at a time
on a machine with nothing else on it; the tiers that only check behaviour (pure logic, the benches' smoke runs,
a real API server's answers, faults and signals) run at the same time as one another, each on both cores with
pytest-xdist: they mostly wait on processes, not on the CPU. The first of them prints as it goes, the others
when they end. Every tier runs even when one before it failed, so one run shows every failure; the exit status
is the first failing tier's.

    python tests/tiers.py [--tier local ...] [-- extra pytest arguments for every tier]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
WORKERS = "2"  # pytest-xdist workers for the tiers that measure nothing
PURE = "not slow and not kubernetes and not cluster"
TIMED = ("tests/local", "tests/locustfile", "tests/bench/test_openloop.py")  # real processes and timing: one at a time


@dataclass(frozen=True)
class Tier:
    name: str
    what: str
    args: tuple[str, ...]
    parallel: bool
    beside: bool = False  # runs at the same time as the tier before it (and that one's other companions)


TIERS = (
    Tier("local", "real Envoy, nginx, Locust and Prometheus on this machine that measure CPU: one at a time",
         (*TIMED, "-m", "not parallel_safe"), parallel=False),
    Tier("local-faults", "real components whose checks a busy CPU does not move (faults, signals, errors)",
         (*TIMED, "-m", "parallel_safe"), parallel=True),
    Tier("bench", "every bench script once, tiny; the report in Chromium",
         ("tests/bench", "tests/report", "--ignore=tests/bench/test_openloop.py", "-m", "slow"), parallel=True,
         beside=True),
    Tier("pure", "logic, engine, report: no real component",
         ("tests", *(f"--ignore={path}" for path in TIMED), "-m", PURE), parallel=True, beside=True),
    Tier("kubernetes", "a real kube-apiserver and etcd; k8s/'s build, chart and manifest checks",
         ("tests/kubernetes", "tests/cluster_infra", "-m", "kubernetes and not cluster"), parallel=True,
         beside=True),
    Tier("cluster", "the one-machine cluster (measures CPU: one at a time)",
         ("tests/cluster", "tests/cluster_infra", "-m", "cluster"), parallel=False),
)  # fmt: skip


def command(tier: Tier, extra: list[str]) -> list[str]:
    argv = [sys.executable, "-m", "pytest", *tier.args, *extra]
    return [*argv, "-n", WORKERS] if tier.parallel else argv


def run_phase(phase: list[Tier], extra: list[str]) -> list[tuple[Tier, int, float]]:
    """The tiers of one phase at the same time: the first prints as it runs, the others into a file each, printed
    when it ends. Returns (tier, exit status, seconds) per tier."""
    started = time.monotonic()
    running: list[tuple[Tier, subprocess.Popen[bytes], IO[bytes] | None]] = []
    results = []
    with contextlib.ExitStack() as files:
        for position, tier in enumerate(phase):
            print(f"\n=== tier {tier.name}: {tier.what}\n$ {' '.join(command(tier, extra)[1:])}", flush=True)
            output = None if position == 0 else files.enter_context(tempfile.TemporaryFile())
            env = {**os.environ, "GATEWAY_SIZER_TIER": tier.name}
            process = subprocess.Popen(command(tier, extra), cwd=ROOT, env=env, stdout=output, stderr=output)
            running.append((tier, process, output))
        ended: dict[str, float] = {}
        while len(ended) < len(running):  # each tier's own end, for the time table
            for tier, process, _ in running:
                if tier.name not in ended and process.poll() is not None:
                    ended[tier.name] = time.monotonic() - started
            time.sleep(0.5)
        for tier, process, output in running:
            results.append((tier, process.wait(), ended[tier.name]))
            if output is not None:
                output.seek(0)
                print(f"\n=== tier {tier.name} (ran beside {phase[0].name}):", flush=True)
                sys.stdout.buffer.write(output.read())
                sys.stdout.flush()
    return results


def phases(chosen: list[Tier]) -> list[list[Tier]]:
    """The chosen tiers in order, a tier marked `beside` joining the phase of the one before it."""
    grouped: list[list[Tier]] = []
    for tier in chosen:
        if tier.beside and grouped:
            grouped[-1].append(tier)
        else:
            grouped.append([tier])
    return grouped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", action="append", choices=[t.name for t in TIERS], help="run only these tiers")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to every tier's pytest")
    args = parser.parse_args()
    extra = [a for a in args.pytest_args if a != "--"]
    chosen = [t for t in TIERS if not args.tier or t.name in args.tier]
    started = time.monotonic()
    results = [result for phase in phases(chosen) for result in run_phase(phase, extra)]
    print("\n=== make test: time per tier (tiers run beside one another overlap)")
    width = max(len(t.name) for t in TIERS) + 2
    print(f"{'tier':<{width}}{'result':<16}{'minutes':>8}")
    for tier, code, seconds in results:
        verdict = "passed" if code == 0 else ("no tests" if code == 5 else f"failed (exit {code})")
        print(f"{tier.name:<{width}}{verdict:<16}{seconds / 60:>8.1f}")
    print(f"{'total (wall)':<{width + 16}}{(time.monotonic() - started) / 60:>8.1f}", flush=True)
    failed = [code for _, code, _ in results if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main())

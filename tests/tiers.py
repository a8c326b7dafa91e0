"""`make test`: the suite in tiers, one pytest run each, and a table of how long each took.

The tiers that measure CPU (the local platform's real sweeps, the one-machine cluster) run one test at a time
on a machine with nothing else on it; the tiers that only check behaviour (pure logic, the benches' smoke runs,
a real API server's answers) run on both cores with pytest-xdist. Every tier runs even when one before it
failed, so one run shows every failure; the exit status is the first failing tier's.

    python tests/tiers.py [--tier local ...] [-- extra pytest arguments for every tier]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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


TIERS = (
    Tier("local", "real Envoy, nginx, Locust and Prometheus on this machine that measure CPU: one at a time",
         (*TIMED, "-m", "not parallel_safe"), parallel=False),
    Tier("local-faults", "real components whose checks a busy CPU does not move (faults, signals, errors)",
         (*TIMED, "-m", "parallel_safe"), parallel=True),
    Tier("bench", "every bench script once, tiny; the report in Chromium",
         ("tests/bench", "tests/report", "--ignore=tests/bench/test_openloop.py", "-m", "slow"), parallel=True),
    Tier("pure", "logic, engine, report: no real component",
         ("tests", *(f"--ignore={path}" for path in TIMED), "-m", PURE), parallel=True),
    Tier("cluster", "the one-machine cluster (measures CPU: one at a time)", ("tests", "-m", "cluster"),
         parallel=False),
    Tier("kubernetes", "a real kube-apiserver and etcd", ("tests", "-m", "kubernetes and not cluster"),
         parallel=True),
)  # fmt: skip


def run(tier: Tier, extra: list[str]) -> tuple[int, float]:
    command = [sys.executable, "-m", "pytest", *tier.args, *extra]
    if tier.parallel:
        command += ["-n", WORKERS]
    print(f"\n=== tier {tier.name}: {tier.what}\n$ {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "GATEWAY_SIZER_TIER": tier.name})
    return done.returncode, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", action="append", choices=[t.name for t in TIERS], help="run only these tiers")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to every tier's pytest")
    args = parser.parse_args()
    extra = [a for a in args.pytest_args if a != "--"]
    chosen = [t for t in TIERS if not args.tier or t.name in args.tier]
    results = [(tier, *run(tier, extra)) for tier in chosen]
    print("\n=== make test: time per tier")
    width = max(len(t.name) for t in TIERS) + 2
    print(f"{'tier':<{width}}{'result':<16}{'minutes':>8}")
    for tier, code, seconds in results:
        verdict = "passed" if code == 0 else ("no tests" if code == 5 else f"failed (exit {code})")
        print(f"{tier.name:<{width}}{verdict:<16}{seconds / 60:>8.1f}")
    total = sum(seconds for _, _, seconds in results)
    print(f"{'total':<{width + 16}}{total / 60:>8.1f}", flush=True)
    failed = [code for _, code, _ in results if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Harness overhead: Locust RPS per worker core inside the toolkit vs bare `locust --headless`.

Both drive the same nginx replica directly (no gateway, so the generator is the limit) with the same
locustfile, user class and closed-loop users, pinned to the same core, in alternating rounds:
- inside: the local test bed's Locust master + one worker, load set through the master's HTTP API and
  counted by the window snapshot the sweep uses, CPU from the worker's cgroup;
- bare: one `locust --headless` process, counted from its per-second CSV history, CPU from /proc.
Prints the medians and inside / bare (1.0 = no overhead).

    .venv/bin/python bench/harness_overhead.py [--client lean] [--rounds 3] [--window 10] [--users 16]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _runs import REPO

from runner.locust import LocustOptions
from runner.platforms.local.testbed import LocalTestbed, LocustSetup, Ports

CLASSES = {"lean": "LeanGatewayUser", "fasthttp": "FastGatewayUser"}
WARMUP_S = 4.0
GENERATOR_CPU, BACKEND_CPU = "1", "0"


def _pin(pid: int, cpus: str) -> None:
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True, check=False)


def inside(testbed: LocalTestbed, user_class: str, users: int, window: float) -> float:
    options = LocustOptions("external.nginx", "/")
    locust = testbed.start_locust(LocustSetup(REPO / "locustfiles" / "gateway.py", user_class, options, workers=1))
    container = testbed.containers["locust-worker-0"]
    worker, cgroup = container.process, container.cgroup
    assert worker is not None
    _pin(worker.pid, GENERATOR_CPU)
    try:
        locust.swarm(users, 100, testbed.backend_url(0), options)
        time.sleep(WARMUP_S)
        start = int(time.time()) + 1
        time.sleep(start - time.time())
        cpu0 = cgroup.cpu_usage_seconds()
        time.sleep(window)
        cpu1 = cgroup.cpu_usage_seconds()
        time.sleep(3.5)  # workers report every 3 s
        snapshot = locust.snapshot()
        requests = sum(n for t, n in snapshot.requests_per_second.items() if start <= t < start + int(window))
        locust.stop()
        return requests / (cpu1 - cpu0)
    finally:
        testbed.stop_locust()


def bare(testbed: LocalTestbed, user_class: str, users: int, window: float) -> float:
    with tempfile.TemporaryDirectory() as folder:
        prefix = Path(folder) / "bare"
        run_s = WARMUP_S + window + 3
        process = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "gateway.py"), "--headless",
             "-u", str(users), "-r", "100", "-t", f"{run_s:.0f}s", "--host", testbed.backend_url(0),
             "--csv", str(prefix), "--csv-full-history", "--loglevel", "WARNING", "--only-summary", user_class],
            cwd=REPO / "locustfiles", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _pin(process.pid, GENERATOR_CPU)
        proc = psutil.Process(process.pid)
        time.sleep(WARMUP_S)
        start = time.time()
        cpu0 = sum(proc.cpu_times()[:2])
        time.sleep(window)
        cpu1 = sum(proc.cpu_times()[:2])
        end = time.time()
        process.wait(timeout=60)
        rows = [
            r for r in csv.DictReader((prefix.parent / "bare_stats_history.csv").open()) if r["Name"] == "Aggregated"
        ]
        counts = [(int(r["Timestamp"]), int(r["Total Request Count"])) for r in rows]
        before = max((c for t, c in counts if t <= start), default=0)
        after = max((c for t, c in counts if t <= end), default=0)
        return (after - before) / (cpu1 - cpu0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", default="lean", choices=sorted(CLASSES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=16)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"inside": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-harness-") as folder:
        testbed = LocalTestbed(workdir=Path(folder), ports=Ports.free(), testbed_id=f"bench-{os.getpid()}")
        try:
            testbed.scale_backend(1)
            for pid in testbed.containers["nginx-0"].cgroup.pids():
                _pin(pid, BACKEND_CPU)
            for round_index in range(args.rounds):
                order = ("inside", "bare") if round_index % 2 == 0 else ("bare", "inside")
                for name in order:
                    measure = inside if name == "inside" else bare
                    value = measure(testbed, CLASSES[args.client], args.users, args.window)
                    results[name].append(value)
                    print(f"round {round_index + 1} {name:<6} {value:,.0f} RPS per generator core", flush=True)
        finally:
            testbed.stop()
    inside_median, bare_median = statistics.median(results["inside"]), statistics.median(results["bare"])
    if not inside_median or not bare_median:  # no ratio to print: say why in one line, exit 1
        which = "bare locust --headless" if not bare_median else "Locust inside the toolkit"
        raise SystemExit(f"no ratio: {which} counted no request in its windows (a busy machine, or a short --window)")
    print(
        f"{args.client}: inside the toolkit {inside_median:,.0f}, bare locust --headless {bare_median:,.0f} "
        f"RPS per worker core; inside / bare = {inside_median / bare_median:.2f}"
    )


if __name__ == "__main__":
    main()

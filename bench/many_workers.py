"""One Locust master with many workers: does the master side cope (issue 13, WORKERS=auto for big sweeps)?

A sweep of Envoy 1..6 cores on a cluster plans up to about a hundred Locust workers. This starts the
local test bed's Locust master with N worker processes (each in its own cgroup, as the sweep's are), waits
for all of them, holds a paced load spread over every worker through nginx, and prints:
- how long until all N workers were connected and ready;
- the master's CPU (its cgroup) while idle with N workers (heartbeats only) and while loaded (stats
  reports every 3 s from each worker);
- workers the master saw missing (Locust marks one missing after 3 missed 1 s heartbeats);
- the load delivered against the load offered, and whether the per-second counts stayed complete.

    .venv/bin/python bench/many_workers.py [--workers 100] [--rps 2000] [--seconds 20]

Locust's limits, from locust/runners.py 2.47: HEARTBEAT_INTERVAL 1 s, HEARTBEAT_LIVENESS 3,
WORKER_REPORT_INTERVAL 3 s: with N workers the master handles about N + N/3 messages a second.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _runs import REPO, TINY

from runner.locust import LocustOptions
from runner.platforms.local.testbed import LocalTestbed, LocustSetup, Ports

START_PER_WORKER_S = 3.0  # a worker process imports Locust and gevent: about a second of CPU each, here 2 cores


def _cores(testbed: LocalTestbed, pod: str, seconds: float) -> float:
    """Cores the pod's cgroup used over the next `seconds`."""
    cgroup = testbed.containers[pod].cgroup
    before = cgroup.cpu_usage_seconds()
    time.sleep(seconds)
    return (cgroup.cpu_usage_seconds() - before) / seconds


def run(workers: int, rps: float, seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-many-workers-") as folder:
        testbed = LocalTestbed(workdir=Path(folder), ports=Ports.free(), testbed_id=f"bench-workers-{workers}")
        try:
            testbed.scale_backend(1, worker_processes=1)
            users = max(workers, int(rps / 5))  # 5 RPS per user, at least one user per worker
            options = LocustOptions("external.nginx", "/", user_rps=rps / users)
            setup = LocustSetup(REPO / "locustfiles" / "gateway.py", "LeanGatewayUser", options, workers)
            started = time.monotonic()
            master = testbed.start_locust(setup, timeout_s=60 + START_PER_WORKER_S * workers)
            connected_s = time.monotonic() - started
            idle = _cores(testbed, "locust-master", min(10.0, seconds))
            master.swarm(users, 200, testbed.backend_url(0), options)
            time.sleep(3 + users / 200)
            start = int(time.time()) + 1
            loaded = _cores(testbed, "locust-master", seconds)
            time.sleep(4)  # the last reports
            snapshot = master.snapshot()
            stats = master.stats()
            master.stop()
            counts = [snapshot.requests_per_second.get(t, 0) for t in range(start, start + int(seconds))]
            missing = sum(1 for w in snapshot.workers if w.state == "missing")
        finally:
            testbed.stop()
    delivered = statistics.fmean(counts) if counts else 0.0
    complete = sum(1 for c in counts if c > 0.5 * rps)
    print(f"{workers} workers: all connected in {connected_s:.0f} s ({stats.get('worker_count')} at the end)")
    print(f"master CPU idle with {workers} workers: {idle:.3f} cores; under load: {loaded:.3f} cores")
    print(f"workers seen missing: {missing}")
    print(f"load: {delivered:,.0f} of {rps:,.0f} RPS offered by {users} users ({delivered / rps:.0%}); ")
    print(f"seconds with a complete count: {complete} of {len(counts)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4 if TINY else 100)
    parser.add_argument("--rps", type=float, default=200.0 if TINY else 2000.0)
    parser.add_argument("--seconds", type=float, default=3.0 if TINY else 20.0)
    args = parser.parse_args()
    run(args.workers, args.rps, args.seconds)


if __name__ == "__main__":
    main()

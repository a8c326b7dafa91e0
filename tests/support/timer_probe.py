"""Wakes greenlets with locustfiles/fine_timer.sleep_until, in its own process (GATEWAY_SIZER_TIMER picks the
timer), and prints what it saw as JSON:

    python -m support.timer_probe poisson RATE SECONDS   how late 200 users on a Poisson schedule woke, and how
                                                          their wake-ups cluster
    python -m support.timer_probe kill                   sleepers killed while they wait, beside others that are not
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
import sys
import time

import gevent

from runner.paths import LOCUSTFILE_DIR

sys.path.insert(0, str(LOCUSTFILE_DIR))
from fine_timer import sleep_until

USERS = 200


def poisson(rate: float, seconds: float) -> dict[str, float]:
    start = time.monotonic() + 0.2
    woke: list[tuple[float, float]] = []  # (due, woke at)

    def user(seed: int) -> None:
        draw, due = random.Random(seed), start
        while True:
            due += draw.expovariate(rate / USERS)
            if due > start + seconds:
                return
            sleep_until(due)
            woke.append((due, time.monotonic()))

    cpu = time.process_time()
    gevent.joinall([gevent.spawn(user, seed) for seed in range(USERS)])
    cpu = time.process_time() - cpu
    late = sorted(w - d for d, w in woke)
    times = sorted(w for _, w in woke)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    counts = [0] * (int(seconds * 1000) + 1)
    for moment in times:
        counts[min(int((moment - start) * 1000), len(counts) - 1)] += 1
    return {
        "wakes": len(woke),
        "late_median_us": late[len(late) // 2] * 1e6,
        "late_p90_us": late[int(0.9 * len(late))] * 1e6,
        "earliest_us": max(d - w for d, w in woke) * 1e6,  # the most a wake-up came before its due time
        "gaps_under_50us": sum(g < 50e-6 for g in gaps) / len(gaps),
        "dispersion_1ms": statistics.pvariance(counts) / statistics.fmean(counts),
        "cpu_per_wake_us": cpu / len(woke) * 1e6,
    }


def kill() -> dict[str, float]:
    start = time.monotonic()
    woke: list[tuple[int, float]] = []

    def sleeper(index: int) -> None:
        sleep_until(start + 0.05 + 0.01 * index)
        woke.append((index, time.monotonic() - start))

    sleepers = [gevent.spawn(sleeper, index) for index in range(10)]
    gevent.sleep(0.01)
    gevent.killall(sleepers[::2])  # the earliest due among them, and every second one after
    gevent.joinall(sleepers, timeout=2)
    return {"woke": [index for index, _ in woke], "late_ms": max(at - 0.05 - 0.01 * i for i, at in woke) * 1e3}


if __name__ == "__main__":
    print(json.dumps(poisson(float(sys.argv[2]), float(sys.argv[3])) if sys.argv[1] == "poisson" else kill()))

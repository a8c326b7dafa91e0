"""How fast the CPUs Envoy runs on are right now: a fixed loop timed on them, before each configuration.

A virtual machine's vCPU can run at a fraction of its usual speed for seconds or minutes (a busy
neighbour, a hyper-thread sibling, the host's own work), and Envoy's CPU per request moves with it. The
figure is recorded with each configuration so a report can say how much the machine itself moved during
the run (and a comparison of two runs, how much of a difference it may explain).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
LOOP = 200_000  # iterations of the reference loop: about 10 ms on a 2026 server core
SAMPLES = 15
PAUSE_S = 0.02


def _loop() -> float:
    """Seconds one pass of the reference loop takes."""
    start = time.perf_counter()
    total = 0
    for i in range(LOOP):
        total += i
    return time.perf_counter() - start


def reference_speed(cpus: set[int] | None = None, samples: int = SAMPLES) -> float:
    """Million reference-loop iterations per second on `cpus` (the median of `samples` passes)."""
    previous = os.sched_getaffinity(0)
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        times = []
        for _ in range(samples):
            times.append(_loop())
            time.sleep(PAUSE_S)
    finally:
        os.sched_setaffinity(0, previous)
    return LOOP / statistics.median(times) / 1e6


def read_steal(stat: Path = PROC_STAT) -> tuple[float, float] | None:
    """(stolen, total) CPU seconds of the whole machine from /proc/stat's `cpu` line (None: unreadable)."""
    try:
        fields = [int(v) for v in stat.read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    steal = fields[7] if len(fields) > 7 else 0
    return steal / ticks, sum(fields[:8]) / ticks


def parse_cpu_list(text: str) -> set[int]:
    """ "0-2,5" -> {0, 1, 2, 5}."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus

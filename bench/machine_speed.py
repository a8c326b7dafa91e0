"""Machine speed: how steady this machine's CPUs are, with nothing else running.

The reference loop the sweep times before each configuration (runner/platforms/local/speed.py) is
timed on each CPU in turn every `--every` seconds for `--minutes`; printed are the spread of single
passes (5th-95th percentile around the median) and of one-minute medians: the drift a knee measured
minutes apart inherits on a virtual machine.

    .venv/bin/python bench/machine_speed.py [--minutes 5] [--every 0.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from runner.platforms.local.speed import reference_speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=0.5)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    samples: dict[int, list[tuple[float, float]]] = {cpu: [] for cpu in cpus}
    start = time.monotonic()
    while time.monotonic() - start < args.minutes * 60:
        for cpu in cpus:
            samples[cpu].append((time.monotonic() - start, reference_speed({cpu}, samples=1)))
        time.sleep(args.every)
    for cpu, found in samples.items():
        speeds = np.array([s for _, s in found])
        median = float(np.median(speeds))
        p5, p95 = np.percentile(speeds, [5, 95])
        minutes = [
            statistics.median(s for t, s in found if int(t // 60) == m) for m in range(int(found[-1][0] // 60) + 1)
        ]
        print(
            f"CPU {cpu}: {len(found)} passes, median {median:.2f}M/s, 5th-95th percentile {p5 / median - 1:+.0%} to "
            f"{p95 / median - 1:+.0%}; one-minute medians {min(minutes):.2f}-{max(minutes):.2f}M/s "
            f"({max(minutes) / min(minutes) - 1:.0%} apart)"
        )


if __name__ == "__main__":
    main()

"""Soak: a long local sweep at a steady load; the runner's memory and open files over time, as a slope.

The sweep measures one level over and over (a fixed schedule of equal rates in one round, as many windows as fill
`--minutes`), so the runner does what it does in any long run: set the load, measure windows, save results, send
heartbeats. Its RSS and open file descriptors are read from /proc every `--every` seconds; the slopes per hour come
from a least-squares line (the first two minutes, while imports and caches settle, left out).

    .venv/bin/python bench/soak.py [--minutes 30] [--rps 300] [--every 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from _runs import REPO, TINY, default_scenario, sweep_command

from runner.scenario import MAX_STEPS

SETTLE_S = 120.0
# the shortest window; a tiny run's (the test that runs every bench), 3 s after a 1 s warm-up and before a 1 s settle,
# lets a soak of a few seconds measure its windows whole
WINDOW_S = 3 if TINY else 10
TINY_WAITS = {"warmup_seconds": 1, "settle_seconds": 1} if TINY else {}
STEP_OVERHEAD_S = 7.0  # settle, alignment and the report lag around each window


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rps", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=10.0)
    args = parser.parse_args()
    # as many WINDOW_S windows as fit, at most the scenario's MAX_STEPS: longer windows for a longer soak
    windows = min(MAX_STEPS, max(2, round(args.minutes * 60 / (WINDOW_S + STEP_OVERHEAD_S))))
    window_s = max(WINDOW_S, round(args.minutes * 60 / windows - STEP_OVERHEAD_S))
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-soak-") as folder:
        scenario = default_scenario()
        scenario["envoy"]["cpu"] = [0.25]
        # one round: a fixed schedule runs whole in every round, so local.yaml's 5 rounds would repeat it until the
        # time budget (twice the soak) stopped it, and a 30-minute soak would run 60
        scenario["load"].update(search="fixed", rps=[args.rps] * windows, max_steps=windows, step_seconds=window_s,
                                rounds=1, max_seconds_per_config=args.minutes * 60 * 2, **TINY_WAITS)  # fmt: skip
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        runner = subprocess.Popen(
            sweep_command(path, Path(folder)), cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
        start = time.monotonic()
        samples: list[tuple[float, float, int]] = []
        while runner.poll() is None:
            try:
                samples.append((time.monotonic() - start, _rss_mib(runner.pid), _fds(runner.pid)))
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(args.every)
        runner.wait()
    settle_s = min(SETTLE_S, args.minutes * 60 / 4)  # a short (test) soak leaves out its first quarter
    steady = [s for s in samples if s[0] >= settle_s]
    if len(steady) < 3 or runner.returncode != 0:
        raise SystemExit(f"soak failed: {len(steady)} steady samples, runner exit {runner.returncode}")
    hours = np.array([s[0] for s in steady]) / 3600
    rss_slope = float(np.polyfit(hours, [s[1] for s in steady], 1)[0])
    fd_slope = float(np.polyfit(hours, [s[2] for s in steady], 1)[0])
    print(
        f"{len(samples)} samples over {samples[-1][0] / 60:.1f} min ({windows} windows at {args.rps:g} RPS), "
        f"runner exit {runner.returncode}"
    )
    print(f"RSS: {steady[0][1]:.1f} -> {steady[-1][1]:.1f} MiB, slope {rss_slope:+.2f} MiB per hour")
    print(f"open files: {steady[0][2]} -> {steady[-1][2]}, slope {fd_slope:+.2f} per hour")


if __name__ == "__main__":
    main()

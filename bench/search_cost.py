"""Search cost: measuring windows and wall time of the adaptive search vs a fixed ramp of equal precision.

The adaptive search stops once a step lies within +-2% utilization of the threshold on a bracketed knee.
A fixed ramp of equal precision steps the offered load by 4% of the knee (two steps span the +-2% band),
from the same start, until it passes the threshold.

    .venv/bin/python bench/search_cost.py [--cap 0.3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics

from _runs import knee, run_sweep, scenario_with, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    adaptive, ramp = [], []
    for _ in range(args.repeats):
        scenario = scenario_with(args.cap, search="adaptive")
        summary, wall = run_sweep(scenario)
        found = knee(summary)
        adaptive.append((windows(summary), wall, found))
        start = scenario["load"].get("start_rps", 100)
        step = 0.04 * (found or 1000)
        schedule = [round(start + i * step) for i in range(int(((found or 1000) * 1.15 - start) / step) + 2)]
        ramp_scenario = scenario_with(args.cap, search="ramp", rps=schedule, max_steps=len(schedule) + 1)
        ramp_summary, ramp_wall = run_sweep(ramp_scenario)
        ramp.append((windows(ramp_summary), ramp_wall, knee(ramp_summary)))
    for name, runs in (("adaptive", adaptive), ("fixed ramp", ramp)):
        median_windows = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        knees = ", ".join(f"{r[2]:,.0f}" if r[2] else "-" for r in runs)
        print(f"{name:<11} windows {median_windows:>4.1f}  wall {wall:>6.0f} s  knees {knees}")
    windows_ratio = statistics.median(r[0] for r in ramp) / statistics.median(r[0] for r in adaptive)
    wall_ratio = statistics.median(r[1] for r in ramp) / statistics.median(r[1] for r in adaptive)
    print(f"ratio ramp / adaptive: windows {windows_ratio:.1f}x, wall time {wall_ratio:.1f}x")


if __name__ == "__main__":
    main()

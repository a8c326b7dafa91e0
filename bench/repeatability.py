"""Repeatability: the default sweep run several times; per CPU limit, the knees' spread and whether their
95% intervals overlap (all at one point, and pair by pair), the ratio of the two first limits' knees measured
inside each run (paired round by round) and how far it moves between runs, the control window's drift in
each run, the windows each configuration took and the wall time of a run.

    .venv/bin/python bench/repeatability.py [--runs 5] [--caps 0.25,0.5]

Runs whose configuration found no valid knee are counted and named, not dropped silently.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

import yaml
from _runs import all_overlap, default_scenario, run_sweep, scenario_with, spread, valid

from runner.figures import control_drift, knee_ratio
from runner.model import Knee


def pairwise_overlap(knees: list[Knee]) -> tuple[int, int]:
    """(pairs of intervals that overlap, pairs), over knees that have an interval."""
    bounds = [(k.low, k.high) for k in knees if k.low is not None and k.high is not None]
    pairs = [(a, b) for i, a in enumerate(bounds) for b in bounds[i + 1 :]]
    return sum(1 for a, b in pairs if max(a[0], b[0]) <= min(a[1], b[1])), len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--caps", default=None, help="Envoy CPU limits (default: the default scenario's)")
    parser.add_argument("--arrivals", default=None, help="an arrival model instead of the scenario's")
    parser.add_argument("--load", default=None, help="load fields to replace, as YAML: '{max_rps_per_user: 5}'")
    args = parser.parse_args()
    caps = [float(c) for c in args.caps.split(",")] if args.caps else default_scenario()["envoy"]["cpu"]
    scenario = scenario_with(caps)
    if args.arrivals:
        scenario["load"]["arrivals"] = args.arrivals
    if args.load:
        scenario["load"].update(yaml.safe_load(args.load))
    knees: dict[float, list[Knee]] = defaultdict(list)
    failures: dict[float, list[str]] = defaultdict(list)
    windows: list[int] = []
    walls: list[float] = []
    ratios: list[float] = []
    for run in range(1, args.runs + 1):
        summary, wall = run_sweep(scenario)
        walls.append(wall)
        line = []
        for config in summary.configs:
            cap = config.envoy.cpu_cores
            windows.append(len(config.steps))
            if config.valid_knee is not None:
                knees[cap].append(config.valid_knee)
            else:
                failures[cap].append(f"run {run}: {config.status}")
            speed = f", machine {config.machine_speed:.2f}M/s" if config.machine_speed else ""
            line.append(f"{cap:g}: {valid(config)} in {len(config.steps)} windows{speed}")
        pair = sorted(summary.configs, key=lambda c: c.envoy.cpu_cores)[:2]
        if len(pair) == 2 and all(c.valid_knee is not None for c in pair):
            ratio = knee_ratio(pair[1], pair[0], summary.threshold)
            if ratio is not None:
                ratios.append(ratio.value)
                line.append(f"ratio {ratio.value:.3f} [{ratio.low:.3f}-{ratio.high:.3f}]")
        drift = control_drift(summary)
        if drift is not None:
            line.append(f"control +-{drift.spread:.1%} over {len(drift.rounds)} rounds")
        print(f"run {run} ({wall:.0f} s): " + "; ".join(line), flush=True)
    for cap in sorted(set(knees) | set(failures)):
        found = knees[cap]
        rates = [k.rps for k in found]
        overlap = all_overlap(found)
        widths = [k.half_width for k in found if k.half_width is not None]
        if not found:
            print(f"cap {cap:g}: no valid knee", flush=True)
        else:
            width = f"{statistics.median(widths):.1%}" if widths else "- (no interval)"
            overlapping, pairs = pairwise_overlap(found)
            print(
                f"cap {cap:g}: {len(found)} knees, median {statistics.median(rates):,.0f} RPS, spread "
                f"(max-min)/median {spread(rates):.1%}, min {min(rates):,.0f} max {max(rates):,.0f}; "
                f"intervals all overlap: {'yes' if overlap else 'no'}, pairwise {overlapping} of {pairs}; "
                f"interval half-width median {width}",
                flush=True,
            )
        if failures[cap]:
            print(f"  without a valid knee: {', '.join(failures[cap])}")
    if ratios:
        middle = statistics.median(ratios)
        moved = f"{min(ratios) / middle - 1:+.1%} to {max(ratios) / middle - 1:+.1%}"
        print(f"knee ratio of the two lowest limits, inside each run: median {middle:.3f}, {moved} "
              f"over {len(ratios)} runs")  # fmt: skip
    print(
        f"windows per configuration: mean {statistics.mean(windows):.1f}, max {max(windows)}; "
        f"wall time per run: median {statistics.median(walls):.0f} s ({min(walls):.0f}-{max(walls):.0f})"
    )


if __name__ == "__main__":
    main()

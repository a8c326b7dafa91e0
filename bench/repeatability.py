"""Repeatability: the same configuration measured several times; the spread of its knee in percent.

.venv/bin/python bench/repeatability.py [--cap 0.3] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics

from _runs import knee, run_sweep, scenario_with, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    knees, counts = [], []
    for _ in range(args.runs):
        summary, _ = run_sweep(scenario_with(args.cap))
        found = knee(summary)
        if found:
            knees.append(found)
        counts.append(windows(summary))
        print(f"run {len(counts)}: knee {found or 0:,.0f} RPS in {counts[-1]} windows", flush=True)
    if len(knees) >= 2:
        median = statistics.median(knees)
        print(
            f"knee median {median:,.0f} RPS, spread (max-min)/median {(max(knees) - min(knees)) / median:.1%},"
            f" windows per configuration {statistics.mean(counts):.1f} on average"
        )


if __name__ == "__main__":
    main()

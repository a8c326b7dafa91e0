"""Arrival models: the knee and the capacity at one CPU limit under Poisson, uniform and synchronized
arrivals, measured side by side (the models alternate within each round, so drift hits all alike).

    .venv/bin/python bench/arrivals.py [--cap 0.25] [--rounds 2]

Envoy's CPU per request depends on how requests arrive: bursts let it serve requests back to back,
a smooth stream wakes it for nearly each one. This prints how far apart the three models put the knee.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from _runs import run_sweep, scenario_with, spread

MODELS = ("poisson", "uniform", "synchronized")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.25)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS), help="arrival models to compare")
    args = parser.parse_args()
    knees: dict[str, list[float]] = defaultdict(list)
    capacities: dict[str, list[float]] = defaultdict(list)
    per_request: dict[str, list[float]] = defaultdict(list)
    models = tuple(args.models.split(","))
    for round_ in range(args.rounds):
        order = models[round_ % len(models) :] + models[: round_ % len(models)]
        for model in order:
            # a tiny run (the test that runs every bench) sweeps in one round: the models' code path is the same
            summary, _ = run_sweep(scenario_with(args.cap, arrivals=[model], tiny_rounds=1))
            config = summary.configs[0]
            knee, capacity = config.valid_knee, config.capacity
            if knee is not None:
                knees[model].append(knee.rps)
                per_request[model].append(summary.threshold * args.cap / knee.rps * 1e6)
            if capacity is not None:
                capacities[model].append(capacity.rps)
            interval = f" [{knee.low:,.0f}-{knee.high:,.0f}]" if knee and knee.low and knee.high else ""
            print(
                f"round {round_ + 1} {model:<12}: knee {knee.rps if knee else 0:>7,.0f}{interval}, capacity "
                f"{capacity.rps if capacity else 0:>7,.0f} ({config.status}, {len(config.steps)} windows)",
                flush=True,
            )
    base = statistics.median(knees["poisson"]) if knees["poisson"] else None
    print(f"\ncap {args.cap:g}, medians of {args.rounds} round(s):")
    for model in models:
        if not knees[model]:
            print(f"  {model:<12} no valid knee")
            continue
        median = statistics.median(knees[model])
        versus = f", {median / base - 1:+.1%} vs poisson" if base and model != "poisson" else ""
        served = f"{statistics.median(capacities[model]):,.0f}" if capacities[model] else "-"
        print(
            f"  {model:<12} knee {median:>7,.0f} (spread {spread(knees[model]):.1%}){versus}; capacity {served}; "
            f"{statistics.median(per_request[model]):,.0f} us of Envoy CPU per request at the knee"
        )


if __name__ == "__main__":
    main()

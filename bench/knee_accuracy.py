"""Knee accuracy: the toolkit's knee against Envoy's capacity measured by an independent generator (wrk).

For each Envoy CPU cap, wrk (closed loop, several connection counts, median of rounds), sending the same
Host and Accept-Encoding headers as the sweep's users, measures the most RPS Envoy serves at that cap; the
sweep measures the knee (RPS at 90% of the cap). If Envoy's CPU per request were the same at every load,
the knee would be 0.9 x capacity; the printed ratio knee / (0.9 x capacity) says how far that holds.

    .venv/bin/python bench/knee_accuracy.py [--caps 0.15,0.3] [--arrivals synchronized]
"""

from __future__ import annotations

import argparse

from _runs import knee, request_headers, run_sweep, scenario_with, wrk_capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0.15,0.3")
    parser.add_argument("--arrivals", default=None, help="override load.arrivals of the default scenario")
    args = parser.parse_args()
    overrides = {"arrivals": args.arrivals} if args.arrivals else {}
    print("cap    capacity (wrk, best of connections)   knee     knee / (0.9 x capacity)")
    for cap in (float(c) for c in args.caps.split(",")):
        scenario = scenario_with(cap, **overrides)
        capacity = wrk_capacity(cap, request_headers(scenario))
        best = max(capacity.values())
        summary, _ = run_sweep(scenario)
        measured = knee(summary)
        ratio = f"{measured / (0.9 * best):.2f}" if measured else "-"
        detail = ", ".join(f"{c} conns {r:,.0f}" for c, r in sorted(capacity.items()))
        print(f"{cap:<6} {best:>8,.0f} ({detail})   {measured or 0:>7,.0f}  {ratio}", flush=True)


if __name__ == "__main__":
    main()

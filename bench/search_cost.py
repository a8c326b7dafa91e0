"""Search cost: measuring windows and wall time of the adaptive search against a fixed ramp a person
would set up knowing roughly where the knee is.

- adaptive: the default search (locate, refine the knee to a +-3% interval, bracket the capacity);
- ramp: a fixed schedule from 60% to 110% of the adaptive run's knee in 4% steps (so its resolution,
  +-2% of the knee, is about the adaptive interval's; 12% steps with GATEWAY_SIZER_BENCH_TINY), stopping one
  step past the threshold; it gives no interval and no capacity.
The order alternates between repeats. The ramp's window count follows from its schedule; what the bench
measures is the adaptive search's own count and the wall time of both.

    .venv/bin/python bench/search_cost.py [--cap 0.25] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics

from _runs import TINY, run_sweep, scenario_with

RAMP_FROM, RAMP_TO = 0.60, 1.10
# a tiny run (the test that runs every bench) ramps in 12% steps, 5 levels, and each search sweeps in one round
# (tiny_rounds=1): both searches still run, each once
RAMP_STEP = 0.12 if TINY else 0.04


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    adaptive: list[tuple[int, float, float | None, float | None]] = []
    ramp: list[tuple[int, float, float | None, float | None]] = []
    guess: float | None = None  # set by the first repeat's adaptive run, which goes first
    for repeat in range(args.repeats):
        for name in ("adaptive", "ramp") if repeat % 2 == 0 else ("ramp", "adaptive"):
            if name == "adaptive":
                summary, wall = run_sweep(scenario_with(args.cap, tiny_rounds=1))
            else:
                count = round((RAMP_TO - RAMP_FROM) / RAMP_STEP) + 1
                schedule = [round((guess or 1000.0) * (RAMP_FROM + i * RAMP_STEP)) for i in range(count)]
                ramp_scenario = scenario_with(args.cap, tiny_rounds=1, search="ramp", rps=schedule, max_steps=count)
                summary, wall = run_sweep(ramp_scenario)
            config = summary.configs[0]
            knee = config.valid_knee
            found = (len(config.steps), wall, knee.rps if knee else None, knee.half_width if knee else None)
            (adaptive if name == "adaptive" else ramp).append(found)
            if name == "adaptive":  # the ramp centres on the last knee found (no knee: 1,000 RPS, no extra sweep)
                guess = knee.rps if knee is not None else (guess or 1000.0)
            print(f"repeat {repeat + 1} {name:<8}: {found[0]} windows, {wall:.0f} s, knee {found[2] or 0:,.0f}")
    for name, runs in (("adaptive", adaptive), ("fixed ramp", ramp)):
        widths = [r[3] for r in runs if r[3] is not None]
        width = f", interval +-{statistics.median(widths):.1%}" if widths else ", no interval"
        print(
            f"{name:<11} windows {statistics.median(r[0] for r in runs):>4.1f}  wall "
            f"{statistics.median(r[1] for r in runs):>5.0f} s  knees "
            + ", ".join(f"{r[2]:,.0f}" if r[2] else "-" for r in runs)
            + width
        )
    print(
        "ratio ramp / adaptive: windows "
        f"{statistics.median(r[0] for r in ramp) / statistics.median(r[0] for r in adaptive):.1f}x, wall time "
        f"{statistics.median(r[1] for r in ramp) / statistics.median(r[1] for r in adaptive):.1f}x"
    )


if __name__ == "__main__":
    main()

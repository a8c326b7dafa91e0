"""Knee truth: the sweep's knee against an independent open-loop generator reading Envoy's cgroup directly.

For each cap, side by side in one run (alternating, so drift hits both alike):
1. the sweep (Locust, Prometheus, the adaptive search) measures the knee at that cap with the default
   scenario's arrivals (Poisson), with its 95% interval;
2. an independent generator (bench/openloop, Go, no Locust or Prometheus in the path) drives the same
   Envoy (same cap, same cpuset isolation, same nginx) at fixed Poisson rates around that knee, with as
   many connections as the sweep had users at each rate, while Envoy's cgroup CPU counter is read
   directly; each rate is measured `--passes` times in shuffled order;
3. the same power law is fitted to the generator's windows, and its 90% crossing (with its interval) is
   compared with the sweep's knee: the ratio, and whether the intervals overlap.

    .venv/bin/python bench/knee_truth.py [--caps 0.25,0.5] [--runs 2] [--passes 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _runs import LocalTestbed, Ports, default_scenario, run_sweep, scenario_with
from openloop import command

from runner.knee import SATURATED, power_fit
from runner.platforms.local.placement import place
from runner.platforms.local.testbed import ENVOY_POD

THRESHOLD = 0.90
OFFSETS = (0.84, 0.90, 0.96, 1.02, 1.08)  # generator rates, as shares of the sweep's knee


def generator_windows(cap: float, knee: float, passes: int, seconds: float, user_rps: float) -> list[dict[str, Any]]:
    """Poisson runs of the open-loop generator at rates around `knee` against Envoy at `cap`, with as many
    connections used in turn as the sweep has users (one per `user_rps`)."""
    placement = place(cap, isolate=True)
    testbed = LocalTestbed(
        workdir=Path(tempfile.mkdtemp(prefix="gateway-sizer-truth-")),
        ports=Ports.free(),
        testbed_id=f"bench-{os.getpid()}",
        placement=placement,
    )
    results = []
    try:
        testbed.scale_backend(1)
        testbed.start_envoy(cap, 256 * 2**20, 1)
        cgroup = testbed.containers[ENVOY_POD].cgroup
        counters, throttling = cgroup.usage_folder, cgroup.throttling_folder
        rates = [knee * share for share in OFFSETS]
        for _ in range(passes):
            for rate in random.sample(rates, len(rates)):
                argv = command(testbed.gateway_url, rate, seconds, "poisson", counters, cpu_cgroup=throttling,
                               limit_cores=cap, warmup=3, connections=math.ceil(rate / user_rps),
                               rotate=True)  # fmt: skip
                pin = ["taskset", "-c", placement.others_cpus] if placement.others_cpus else []
                done = subprocess.run([*pin, *argv], capture_output=True, text=True, check=True, timeout=seconds + 60)
                results.append(json.loads(done.stdout))
                print(f"  generator {rate:>7,.0f} RPS: utilization {results[-1]['utilization']:.3f}", flush=True)
    finally:
        testbed.stop()
    return results


def served_points(windows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(RPS, utilization) of the generator's windows that served what they offered and are below saturation."""
    return [
        (w["achieved_rps"], w["utilization"])
        for w in windows
        if w["achieved_rps"] >= 0.98 * w["offered_rps"] and 0.45 <= w["utilization"] < SATURATED
    ]


def crossing(windows: list[dict[str, Any]]) -> tuple[float, tuple[float, float] | None, float] | None:
    """The generator's 90% crossing: the same power law as the sweep's knee, over its served windows;
    None when fewer than two usable windows (or no rising trend) allow no fit."""
    fit = power_fit(served_points(windows))
    if fit is None or fit.exponent <= 0:
        return None
    return fit.rps_at(THRESHOLD), fit.interval(THRESHOLD), fit.exponent


def overlaps(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and max(a[0], b[0]) <= min(a[1], b[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0.25,0.5")
    parser.add_argument("--runs", type=int, default=2, help="sweep + generator rounds per cap")
    parser.add_argument("--passes", type=int, default=3, help="generator passes over the rates per round")
    parser.add_argument("--seconds", type=float, default=10.0, help="generator window per rate")
    parser.add_argument("--center", type=float, default=None, help="rates around this RPS when a sweep finds no knee")
    args = parser.parse_args()
    for cap in (float(c) for c in args.caps.split(",")):
        ratios = []
        for run in range(1, args.runs + 1):
            summary, _ = run_sweep(scenario_with(cap))
            config = summary.configs[0]
            knee = config.valid_knee
            if knee is None:
                print(f"cap {cap:g} run {run}: no valid knee ({config.status}: {config.reason})")
                if args.center is None:
                    continue
            user_rps = float(default_scenario()["load"]["max_rps_per_user"])
            center = knee.rps if knee is not None else float(args.center or 0)
            windows = generator_windows(cap, center, args.passes, args.seconds, user_rps)
            if knee is None:
                print(f"cap {cap:g} run {run}: {len(windows)} generator windows around {center:,.0f} RPS")
                continue
            found = crossing(windows)
            if found is None:
                usable = ", ".join(f"{r:,.0f} RPS {u:.0%}" for r, u in served_points(windows)) or "none"
                print(f"cap {cap:g} run {run}: sweep knee {knee.rps:,.0f}; the generator's {len(windows)} windows "
                      f"allow no fit (usable: {usable}); no ratio for this run", flush=True)  # fmt: skip
                continue
            truth, interval, exponent = found
            sweep_interval = (knee.low, knee.high) if knee.low is not None and knee.high is not None else None
            overlap = overlaps(sweep_interval, interval)
            ratios.append(knee.rps / truth)
            sweep_ci = f"[{knee.low:,.0f}-{knee.high:,.0f}]" if knee.low and knee.high else "[no interval]"
            truth_ci = f"[{interval[0]:,.0f}-{interval[1]:,.0f}]" if interval else "[no interval]"
            print(
                f"cap {cap:g} run {run}: sweep knee {knee.rps:,.0f} {sweep_ci} ({config.arrivals}, {len(config.steps)} "
                f"windows); generator crossing {truth:,.0f} {truth_ci} (exponent {exponent:.2f}, {len(windows)} "
                f"windows); sweep / generator {knee.rps / truth:.3f}; intervals overlap: {'yes' if overlap else 'no'}",
                flush=True,
            )
        if ratios:
            print(
                f"cap {cap:g}: sweep / generator median {statistics.median(ratios):.3f} "
                f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} runs)",
                flush=True,
            )


if __name__ == "__main__":
    main()

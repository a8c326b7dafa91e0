"""Envoy's worker threads at one CPU limit: as many threads as cores against several times as many, side by side.

One Envoy pod on the local test bed (isolated on its own CPU as the local platform runs it), restarted with each
thread count in turn, in shuffled passes; in each pass and for each count, windows at a few offered rates (shares
of the first count's knee, located first by windows RAMP apart until one reaches the threshold), measured by the
sweep's own meter (Prometheus, Locust's lean users), each pod's worker threads read from /proc. The sweep's knee
(runner.knee: a power law through the windows near the threshold) gives that count's knee in that pass.

It prints, per thread count: the knee (median over the passes and its spread), Envoy's CPU per request and p99 at
each rate, the share of CFS periods throttled and the hottest worker thread over the mean; then the ratio of the
knees of each count against the first one, paired pass by pass (median and spread).

    .venv/bin/python bench/worker_threads.py [--limit 0.5] [--threads 1,4] [--shares 0.5,0.7,0.85,0.95]
                                             [--passes 5] [--seconds 8]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

from _runs import TINY, LocalTestbed, Ports

from runner.knee import find_knee
from runner.locust import LocustOptions
from runner.measure import StepMeter
from runner.metrics import Metrics
from runner.model import LoadLevel, Step
from runner.paths import PROJECT_ROOT
from runner.platforms.local.layout import SELECTORS
from runner.platforms.local.placement import place
from runner.platforms.local.testbed import LocustSetup

LOCUSTFILE = PROJECT_ROOT / "locustfiles" / "gateway.py"
THRESHOLD = 0.9
PROBE_RPS_PER_CORE = 1200  # a first window well under any knee seen on a 2-core VM (the probe reads the cost there)
# the locating windows' offered rates grow by this much (a tiny run, the test that runs every bench: twice as much,
# 4 windows to the threshold instead of 8) ...
RAMP = 2.0 if TINY else 1.3
MAX_LOCATE = 10  # ... for at most this many windows
USER_RPS = 10.0  # each lean user paced at this rate: many connections, spread over the worker threads
SETTLE_S = 1 if TINY else 3  # after the users are running, before the window


def _window(testbed: LocalTestbed, meter: StepMeter, options: LocustOptions, rate: float, seconds: int) -> Step:
    users = max(8, math.ceil(rate / USER_RPS))
    level = LoadLevel(users=users, user_rps=rate / users)
    locust = meter.locust
    locust.swarm(users, 500, testbed.gateway_url, dataclasses.replace(options, user_rps=level.user_rps))
    time.sleep(SETTLE_S)
    try:
        return meter.measure(0, level, seconds)
    finally:
        locust.stop()


def _locate(testbed: LocalTestbed, meter: StepMeter, options: LocustOptions, rate: float, seconds: int) -> float:
    """The knee of the running Envoy, from windows RAMP apart from `rate` up to the first at the threshold."""
    steps: list[Step] = []
    while len(steps) < MAX_LOCATE and (not steps or steps[-1].cpu_utilization_mean < THRESHOLD):
        steps.append(_window(testbed, meter, options, rate * RAMP ** len(steps), seconds))
        print(f"locate: {steps[-1].rps:,.0f} RPS at {steps[-1].cpu_utilization_mean:.0%}", flush=True)
    knee = _knee(steps)
    return knee if knee is not None else steps[-1].rps


def _knee(steps: list[Step]) -> float | None:
    """The sweep's knee of these windows (its fit, or interpolated between the two either side), None without one."""
    knee = find_knee([s.model_copy(update={"index": i}) for i, s in enumerate(steps)], THRESHOLD).knee
    return knee.rps if knee is not None else None


def _spread(values: list[float]) -> str:
    """ "1,234 (1,180-1,290, +-4.4%)": the median, the range and half of it over the median ("-" for none)."""
    if not values:
        return "-"
    median = statistics.median(values)
    low, high = min(values), max(values)
    form = ",.2f" if median < 10 else ",.0f"
    return f"{median:{form}} ({low:{form}}-{high:{form}}, +-{(high - low) / 2 / median:.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=0.5, help="Envoy's CPU limit, cores")
    parser.add_argument("--threads", default="1,4", help="worker thread counts (--concurrency), the first the base")
    parser.add_argument("--shares", default="0.6,0.75,0.9,1.0,1.1", help="offered rates as shares of the first knee")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=8, help="each window's length")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    counts = [int(n) for n in args.threads.split(",")]
    shares = [float(s) for s in args.shares.split(",")]
    placement = place(args.limit, isolate=True)
    tiny = " (tiny)" if TINY else ""
    print(f"Envoy {args.limit:g} CPU, {placement.note}; threads {counts}; {args.passes} passes of {args.seconds} s")
    print(f"windows at {shares} of the first count's knee{tiny}")
    testbed_id = f"bench-threads-{random.randrange(10**6)}"
    draw = random.Random(args.seed)
    knees: dict[int, dict[int, float]] = {n: {} for n in counts}  # thread count: pass: knee
    windows: dict[tuple[int, float], list[Step]] = {}
    with tempfile.TemporaryDirectory(prefix="worker-threads-") as folder:
        testbed = LocalTestbed(workdir=Path(folder), ports=Ports.free(), testbed_id=testbed_id, placement=placement)
        try:
            testbed.start_monitoring()
            testbed.scale_backend(1)
            options = LocustOptions("external.nginx", "/", user_rps=USER_RPS)
            locust = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", options, workers=1))
            metrics = Metrics(testbed.prometheus_url)
            meter = StepMeter(locust=locust, metrics=metrics, selectors=SELECTORS, envoy_cpu_limit_cores=args.limit)
            testbed.start_envoy(args.limit, 256 * 2**20, counts[0])
            estimate = _locate(testbed, meter, options, PROBE_RPS_PER_CORE * args.limit, args.seconds)
            print(f"{counts[0]} thread(s): knee about {estimate:,.0f} RPS, the rates' base")
            for number in range(1, args.passes + 1):
                order = draw.sample(counts, len(counts))
                for threads in order:
                    testbed.start_envoy(args.limit, 256 * 2**20, threads)
                    steps = [_window(testbed, meter, options, share * estimate, args.seconds) for share in shares]
                    for share, step in zip(shares, steps, strict=True):
                        windows.setdefault((threads, share), []).append(step)
                    knee = _knee(steps)
                    if knee is not None:
                        knees[threads][number] = knee
                    read = "; ".join(f"{s.rps:,.0f} RPS {s.cpu_utilization_mean:.0%}" for s in steps)
                    knee_text = f"{knee:,.0f}" if knee is not None else "none (its windows place no knee)"
                    print(f"pass {number}, {threads} thread(s): knee {knee_text}; {read}", flush=True)
        finally:
            testbed.stop()
    print(f"\nmedians over {args.passes} passes (range, +- half of it over the median):")
    for threads in counts:
        print(f"{threads} thread(s): knee {_spread(list(knees[threads].values()))} RPS")
        for share in shares:
            steps = windows.get((threads, share), [])
            cost = _spread([s.cpu_per_request_us for s in steps if s.cpu_per_request_us])
            p99 = _spread([s.p99_ms for s in steps if s.p99_ms is not None])
            throttled = statistics.median([s.throttled_share or 0.0 for s in steps] or [0.0])
            hottest = statistics.median([p.worker_spread for s in steps for p in s.pods if p.worker_spread] or [1.0])
            print(
                f"  at {share:.2f} of the first count's knee: {cost} us per request, p99 {p99} ms, "
                f"throttled {throttled:.0%}, hottest worker {hottest:.2f}x the mean"
            )
    base = counts[0]
    for threads in counts[1:]:
        paired = [knee / knees[base][n] for n, knee in knees[threads].items() if n in knees[base]]
        print(f"knee {threads} threads / {base} thread(s), paired pass by pass: {_spread(paired)}")


if __name__ == "__main__":
    main()

"""Where a window's scatter comes from: the machine, or Envoy switching regimes under its CFS quota.

One Envoy (isolated on its own CPU as the local platform runs it), its CPU limit changed by writing the
quota between windows (no restart), driven by the Go open-loop generator (bench/openloop, Poisson arrivals,
no Locust or Prometheus in the path) at a few rates per cap, interleaved in shuffled passes. Every window
records Envoy's CPU per request and utilization from its cgroup, the share of CFS periods throttled, p99,
what was served, the steal time of the machine (/proc/stat) and the reference loop's speed on Envoy's CPU
just before it. A control window (the first cap, its lowest rate) opens every pass.

It prints, per cap and rate: CPU per request median and spread over the passes; the correlation of each
window's CPU per request with the control of its pass (drift common to neighbouring windows), with its
throttled share (regime) and with the reference loop (machine speed); and the ratio between caps of
matched windows inside each pass.

    .venv/bin/python bench/noise.py [--caps 0.25,0.5] [--shares 0.35,0.55,0.75,0.9] [--passes 6] [--seconds 10]
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
import time
from pathlib import Path
from typing import Any

from _runs import LocalTestbed, Ports
from openloop import command

from runner.platforms.local.layout import ENVOY_POD
from runner.platforms.local.placement import place
from runner.platforms.local.speed import parse_cpu_list, reference_speed

# Envoy's CPU per request on a 2-core VM ranged 100-600 us between machines and days; the probe first finds
# this machine's figure at each cap with one window, then places the rates as shares of that cap's knee.
PROBE_RPS_PER_CORE = 1600


def steal_jiffies() -> tuple[int, int]:
    """(steal, total) jiffies of the whole machine from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[7], sum(fields)


def window(testbed: LocalTestbed, cap: float, rate: float, seconds: float, others: str | None) -> dict[str, Any]:
    cgroup = testbed.containers[ENVOY_POD].cgroup
    counters, throttling = cgroup.usage_folder, cgroup.throttling_folder
    argv = command(testbed.gateway_url, rate, seconds, "poisson", counters, cpu_cgroup=throttling, limit_cores=cap,
                   warmup=2, connections=max(8, math.ceil(rate / 5)), rotate=True)  # fmt: skip
    pin = ["taskset", "-c", others] if others else []
    steal0 = steal_jiffies()
    done = subprocess.run([*pin, *argv], capture_output=True, text=True, check=True, timeout=seconds + 60)
    steal1 = steal_jiffies()
    result: dict[str, Any] = json.loads(done.stdout)
    cpu = result["cpu"]
    periods = max(1, cpu.get("nr_periods") or 0)
    return {
        "cap": cap,
        "rate": rate,
        "achieved": result["achieved_rps"],
        "utilization": result["utilization"],
        "us": cpu["us_per_request"],
        "throttled": (cpu.get("nr_throttled") or 0) / periods,
        "p99": result["latency_ms"]["p99"],
        "steal": (steal1[0] - steal0[0]) / max(1, steal1[1] - steal0[1]),
    }


def correlation(xs: list[float], ys: list[float]) -> float:
    return statistics.correlation(xs, ys) if len(xs) > 2 and len(set(xs)) > 1 and len(set(ys)) > 1 else float("nan")


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    return f"{median:7.1f} ({min(values) / median - 1:+.0%}..{max(values) / median - 1:+.0%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0.25,0.5")
    parser.add_argument("--shares", default="0.35,0.55,0.75,0.9", help="rates as shares of each cap's rough knee")
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write every window here")
    args = parser.parse_args()
    caps = [float(c) for c in args.caps.split(",")]
    shares = [float(s) for s in args.shares.split(",")]
    rng = random.Random(args.seed)
    placement = place(max(caps), isolate=True)
    envoy_cpus = parse_cpu_list(placement.envoy_cpus) if placement.envoy_cpus else None
    windows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-noise-") as folder:
        testbed = LocalTestbed(workdir=Path(folder), ports=Ports.free(), testbed_id=f"bench-{os.getpid()}",
                               placement=placement)  # fmt: skip
        try:
            testbed.scale_backend(1)
            testbed.start_envoy(caps[0], 256 * 2**20, 1)
            cgroup = testbed.containers[ENVOY_POD].cgroup
            knees = {}
            for cap in caps:  # a rough knee per cap: grow the rate until a window passes 90%, interpolate in logs
                cgroup.set_cpu_limit(cap)
                rate, last = PROBE_RPS_PER_CORE * cap * 0.25, None
                while True:
                    probe = window(testbed, cap, rate, args.seconds / 2, placement.others_cpus)
                    print(f"cap {cap:g}: probe {probe['achieved']:,.0f} RPS at {probe['utilization']:.0%}", flush=True)
                    if probe["utilization"] >= 0.9 or probe["achieved"] < 0.9 * rate:
                        break
                    last, rate = probe, rate * 1.6
                if last is None:
                    knees[cap] = rate
                else:
                    rise = math.log(probe["utilization"] / last["utilization"])
                    slope = rise / math.log(probe["achieved"] / last["achieved"])
                    knees[cap] = last["achieved"] * (0.9 / last["utilization"]) ** (1 / max(slope, 0.3))
                print(f"cap {cap:g}: rough knee {knees[cap]:,.0f} RPS", flush=True)
            plan = [(cap, knees[cap] * share) for cap in caps for share in shares]
            control = (caps[0], knees[caps[0]] * shares[0])
            started = time.monotonic()
            for number in range(args.passes):
                order = [control, *rng.sample(plan, len(plan))]
                for index, (cap, rate) in enumerate(order):
                    cgroup.set_cpu_limit(cap)
                    speed = reference_speed(envoy_cpus, samples=5)
                    measured = window(testbed, cap, rate, args.seconds, placement.others_cpus)
                    measured.update(passno=number, control=index == 0, speed=speed, t=time.monotonic() - started)
                    windows.append(measured)
                    print(f"pass {number} {'control' if index == 0 else '       '} cap {cap:g} {rate:7,.0f} RPS: "
                          f"served {measured['achieved']:7,.0f}, util {measured['utilization']:.2f}, "
                          f"{measured['us']:6.1f} us/req, throttled {measured['throttled']:.0%}, p99 "
                          f"{measured['p99']:.1f} ms, steal {measured['steal']:.1%}, loop {speed:.1f}",
                          flush=True)  # fmt: skip
        finally:
            testbed.stop()
    if args.json:
        args.json.write_text(json.dumps(windows, indent=1))
    print("\nper cap and rate over the passes: CPU per request (us), utilization, throttled share")
    controls = {w["passno"]: w["us"] for w in windows if w["control"]}
    for cap, rate in plan:
        mine = [w for w in windows if w["cap"] == cap and w["rate"] == rate and not w["control"]]
        us = [w["us"] for w in mine]
        rel = [w["us"] / controls[w["passno"]] for w in mine]
        print(f"  cap {cap:g} {rate:7,.0f} RPS: us {spread(us)}; us/control {spread(rel)}; util "
              f"{min(w['utilization'] for w in mine):.2f}-{max(w['utilization'] for w in mine):.2f}; throttled "
              f"{min(w['throttled'] for w in mine):.0%}-{max(w['throttled'] for w in mine):.0%}; "
              f"corr(us, control) {correlation(us, [controls[w['passno']] for w in mine]):+.2f}, "
              f"corr(us, throttled) {correlation(us, [w['throttled'] for w in mine]):+.2f}, "
              f"corr(us, loop) {correlation(us, [-w['speed'] for w in mine]):+.2f}")  # fmt: skip
    if len(caps) > 1:
        print("\nratio of CPU per request between caps, matched share, per pass")
        for share in shares:
            ratios = []
            for number in range(args.passes):
                pair = [w["us"] for cap in caps[:2] for w in windows
                        if w["passno"] == number and not w["control"] and w["cap"] == cap
                        and abs(w["rate"] - knees[cap] * share) < 1e-6]  # fmt: skip
                if len(pair) == 2:
                    ratios.append(pair[1] / pair[0])
            if ratios:
                print(f"  share {share:.2f}: {caps[1]:g}/{caps[0]:g} us ratio {spread(ratios)}")


if __name__ == "__main__":
    main()

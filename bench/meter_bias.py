"""Meter bias: where the sweep's knee and an independent generator's crossing part (bench/knee_truth.py).

knee_truth found the sweep's knee 4-21% above the Go generator's 90% crossing. Two things differ between them:
the load (Locust's users against the Go generator's connections) and the meter (the sweep reads Envoy's CPU from
Prometheus' scrapes of its cgroup; the generator reads the cgroup's counter itself). This bench holds one apart
from the other at the same fixed rates, interleaved round by round on one Envoy:

- Locust windows as the sweep measures them (a fixed schedule in rounds), with Envoy's CPU per request from
  Prometheus (the sweep's meter) and from the cgroup's counter read directly every 0.2 s over the same window;
- between the rounds, Go generator windows at the same rates, with the cgroup's counter as knee_truth reads it.

It prints, per rate, the median CPU per request of each and the ratios paired round by round: meter (Locust via
Prometheus / Locust direct) and load (Locust direct / Go direct), with their spread over rounds.

    .venv/bin/python bench/meter_bias.py [--cap 0.25] [--shares 0.55,0.7,0.85] [--rounds 4] [--seconds 10]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _runs import GENERATOR_WARMUP_S, scenario_with, spread
from openloop import command

from runner.knee import find_knee
from runner.model import Step
from runner.observer import SweepObserver
from runner.plan import Configuration, plan_sweep
from runner.platforms.local.layout import ENVOY_POD
from runner.platforms.local.platform import LocalPlatform
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep

THRESHOLD = 0.90
SAMPLE_S = 0.2


class CgroupClock:
    """Envoy's cgroup CPU counter, sampled every SAMPLE_S in a thread: (time, seconds used) pairs."""

    def __init__(self, read: Any) -> None:
        self.read = read
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            try:
                self.samples.append((time.time(), self.read()))
            except (OSError, KeyError):  # Envoy (re)starting: its cgroup is being made
                continue

    def cores(self, start: float, end: float) -> float | None:
        """Mean cores used over [start, end], between the samples nearest inside it."""
        times = [t for t, _ in self.samples]
        first, last = bisect.bisect_left(times, start), bisect.bisect_right(times, end) - 1
        if last - first < 2:
            return None
        (t0, u0), (t1, u1) = self.samples[first], self.samples[last]
        return (u1 - u0) / (t1 - t0) if u1 >= u0 else None


class Interleaved(SweepObserver):
    """Samples Envoy's cgroup from the start; runs the Go generator before every round but the first and after
    the last, at the sweep's rates."""

    def __init__(self, platform: LocalPlatform, rates: list[float], cap: float, seconds: float, user_rps: float):
        self.platform, self.rates, self.cap, self.seconds, self.user_rps = platform, rates, cap, seconds, user_rps
        self.clock: CgroupClock | None = None
        self.direct: dict[int, float] = {}  # a Locust window's index: cores read from the cgroup directly
        self.generator: list[dict[str, Any]] = []

    def load_changed(self, level: Any, phase: str, seconds: float) -> None:
        if self.clock is None:  # Envoy runs by the first load
            containers = self.platform.testbed.containers
            self.clock = CgroupClock(lambda: containers[ENVOY_POD].cgroup.cpu_usage_seconds())

    def step_measured(self, config: Configuration, step: Step) -> None:
        assert self.clock is not None
        time.sleep(2 * SAMPLE_S)  # the sample after the window's end
        cores = self.clock.cores(step.started_at, step.started_at + step.window_s)
        if cores is not None:
            self.direct[step.index] = cores

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        if number > 1:
            self.run_generator(number - 1)

    def rounds_finished(self, rounds: int) -> None:
        self.run_generator(rounds)

    def run_generator(self, round_: int) -> None:
        testbed = self.platform.testbed
        cgroup = testbed.containers[ENVOY_POD].cgroup
        pin = ["taskset", "-c", testbed.placement.others_cpus] if testbed.placement.others_cpus else []
        for rate in self.rates:
            argv = command(testbed.gateway_url, rate, self.seconds, "poisson", cgroup.usage_folder,
                           cpu_cgroup=cgroup.throttling_folder, limit_cores=self.cap, warmup=GENERATOR_WARMUP_S,
                           connections=math.ceil(rate / self.user_rps), rotate=True)  # fmt: skip
            began = time.time()
            done = subprocess.run([*pin, *argv], capture_output=True, text=True, check=True, timeout=self.seconds + 60)
            start, end = began + GENERATOR_WARMUP_S + 1, time.time() - 1  # after its warm-up, inside its measured span
            time.sleep(2 * self.platform.scenario.prometheus.scrape_interval_s)  # Prometheus has the span
            metrics, envoy = self.platform.metrics, self.platform.selectors.envoy
            seen = {
                "envoy_rps": metrics.envoy_rps(envoy, start, end),
                "envoy_cx": metrics.envoy_cx_rate(envoy, start, end),
            }
            self.generator.append({**json.loads(done.stdout), **seen, "round": round_, "rate": rate})


def locate(cap: float) -> float:
    """The knee at `cap` from one short adaptive pass (rates for the comparison come from it); a tiny run keeps 6
    windows for it, as 3 did not always climb to the threshold from where the search starts."""
    data = scenario_with(cap, rounds=1, step_seconds=6, warmup_seconds=3, settle_seconds=2, tiny_steps=6)
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-bias-") as folder:
        store = RunStore.create(scenario, Path(folder))
        platform = LocalPlatform(scenario, store.run_dir, free_ports=True)
        Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store).run()
    knee = find_knee(store.summary.configs[0].steps, THRESHOLD).knee
    if knee is None:
        raise SystemExit(f"no knee at {cap:g} cores to place the rates: {store.summary.configs[0].reason}")
    return knee.rps


def compare(cap: float, rates: list[float], rounds: int, seconds: float) -> tuple[list[Step], Interleaved]:
    data = scenario_with(cap, rounds=rounds, search="fixed", rps=rates, step_seconds=round(seconds),
                         warmup_seconds=3, settle_seconds=2)  # fmt: skip
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-bias-") as folder:
        store = RunStore.create(scenario, Path(folder))
        platform = LocalPlatform(scenario, store.run_dir, free_ports=True)
        observer = Interleaved(platform, rates, cap, seconds, scenario.load.max_rps_per_user)
        Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, observer=observer).run()
    if observer.clock is not None:
        observer.clock.stopped.set()
    return store.summary.configs[0].steps, observer


def _us(cores: float, rps: float) -> float:
    return cores / rps * 1e6 if rps > 0 else math.nan


def report(rates: list[float], steps: list[Step], observer: Interleaved) -> None:
    print("rate      Locust/Prometheus  Locust/cgroup  Go/cgroup   meter (P/c)       load (Locust/Go)", flush=True)
    for rate in rates:
        mine = [s for s in steps if s.target_rps is not None and abs(s.target_rps - rate) < 0.5]
        by_round: dict[int, dict[str, float]] = {}
        for s in mine:
            entry = by_round.setdefault(s.round, {})
            entry["prometheus"] = _us(s.envoy_cpu_cores, s.rps)
            if s.index in observer.direct:
                entry["direct"] = _us(observer.direct[s.index], s.rps)
        for w in observer.generator:
            if w["rate"] == rate:
                by_round.setdefault(w["round"], {})["go"] = _us(w["utilization"] * w["limit_cores"], w["achieved_rps"])
        full = [e for e in by_round.values() if {"prometheus", "direct", "go"} <= set(e)]
        if not full:
            print(f"{rate:7,.0f}  (no round with all three)", flush=True)
            continue
        meter = [e["prometheus"] / e["direct"] for e in full]
        load = [e["direct"] / e["go"] for e in full]
        medians = [statistics.median(e[k] for e in full) for k in ("prometheus", "direct", "go")]
        go = [w for w in observer.generator if w["rate"] == rate]
        locust = [s for s in mine if s.envoy_cx_rate is not None]
        print(f"{'':9}Go: served {statistics.median(w['achieved_rps'] for w in go):,.0f}/s, Envoy counted "
              f"{statistics.median(w['envoy_rps'] for w in go):,.0f}/s, new connections "
              f"{statistics.median(w['envoy_cx'] for w in go):.1f}/s (connections bound "
              f"{go[0]['connections']['bound']}, used {statistics.median(w['connections']['used'] for w in go):.0f}); "
              f"Locust: Envoy counted {statistics.median(s.envoy_rps for s in mine):,.0f}/s, new connections "
              f"{statistics.median(s.envoy_cx_rate or 0 for s in locust) if locust else 0:.1f}/s, users "
              f"{statistics.median(s.users for s in mine):.0f}", flush=True)  # fmt: skip
        ratios = f"{statistics.median(meter):.3f} (+-{spread(meter) / 2:.1%})   "
        ratios += f"{statistics.median(load):.3f} (+-{spread(load) / 2:.1%})"
        print(f"{rate:7,.0f}  {medians[0]:12.1f} us  {medians[1]:10.1f} us  {medians[2]:7.1f} us   {ratios}"
              f"   ({len(full)} rounds)", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.25)
    parser.add_argument("--shares", default="0.55,0.7,0.85", help="rates as shares of the located knee")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    knee = locate(args.cap)
    rates = [round(knee * float(share)) for share in args.shares.split(",")]
    print(f"cap {args.cap:g}: knee located at {knee:,.0f} RPS; rates {rates}", flush=True)
    steps, observer = compare(args.cap, [float(r) for r in rates], args.rounds, args.seconds)
    report([float(r) for r in rates], steps, observer)


if __name__ == "__main__":
    main()

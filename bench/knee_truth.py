"""Knee truth: the sweep's knee against an independent open-loop generator, interleaved round by round.

One Envoy at one CPU limit serves both, in the same process, so both see the same machine:
1. the sweep (Locust, Prometheus, the default adaptive search in rounds) measures the knee with its 95%
   interval from the scatter between rounds;
2. between the sweep's rounds (Locust idle), an independent generator (bench/openloop, Go, no Locust or
   Prometheus in the path) drives the same Envoy at fixed Poisson rates around the knee found so far, with as
   many connections as the sweep has users at each rate, while Envoy's cgroup CPU counter is read directly;
3. the same rounds power law is fitted to the generator's windows (a round per pass), and its 90% crossing is
   checked against the sweep's interval.

    .venv/bin/python bench/knee_truth.py [--caps 0.25,0.5] [--runs 5] [--rounds 5] [--seconds 10] [--workers 1,2]
        [--backends epoll/linux_iouring,epoll] [--timers fine/gevent]

With several worker counts, each run measures them one after the other (the order turned each run), so the
bias of each against the generator comes from the same stretch of the machine's time; `--backends` does the
same for the gevent loop backend the Locust workers run on (GEVENT_BACKEND), and `--timers` for their paced users'
send timer (GATEWAY_SIZER_TIMER: fine, a timerfd, or gevent, gevent.sleep).

A run's line: the sweep's knee and interval, the generator's crossing and interval, whether the crossing lies
inside the sweep's interval, and the generator's utilization over what the sweep's curve of the same round reads
at the generator's rates (about 1: the two loads cost Envoy the same there, and a gap between the crossings comes
from the fits; above 1: the generator's requests cost more). The last line per cap counts those runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _runs import GENERATOR_WARMUP_S, WorkerLoop, add_worker_loop_options, scenario_with, worker_loops
from openloop import command

from runner.curve import RoundPoint, RoundsFit, jackknife, rounds_fit
from runner.knee import SATURATED, find_knee
from runner.model import ConfigResult, Knee
from runner.observer import SweepObserver
from runner.plan import Configuration, plan_sweep
from runner.platforms.local.layout import ENVOY_POD
from runner.platforms.local.platform import LocalPlatform
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep

THRESHOLD = 0.90
OFFSETS = (0.85, 0.95, 1.05)  # generator rates, as shares of the knee the sweep has found so far


class GeneratorBetweenRounds(SweepObserver):
    """Runs the open-loop generator against the sweep's Envoy before every round but the first, and after
    the last, at rates around the knee the sweep's windows place so far."""

    def __init__(self, platform: LocalPlatform, store: RunStore, cap: float, seconds: float, user_rps: float):
        self.platform = platform
        self.store = store
        self.cap = cap
        self.seconds = seconds
        self.user_rps = user_rps
        self.windows: list[dict[str, Any]] = []

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        if number > 1:
            self.run_generator(number - 1)

    def rounds_finished(self, rounds: int) -> None:
        self.run_generator(rounds)  # after the last round, while the test bed still runs

    def run_generator(self, after_round: int) -> None:
        [config] = self.store.summary.configs
        knee = find_knee(config.steps, THRESHOLD).knee
        if knee is None:
            return
        testbed = self.platform.testbed
        cgroup = testbed.containers[ENVOY_POD].cgroup
        pin = ["taskset", "-c", testbed.placement.others_cpus] if testbed.placement.others_cpus else []
        for share in OFFSETS:
            rate = knee.rps * share
            argv = command(testbed.gateway_url, rate, self.seconds, "poisson", cgroup.usage_folder,
                           cpu_cgroup=cgroup.throttling_folder, limit_cores=self.cap, warmup=GENERATOR_WARMUP_S,
                           connections=math.ceil(rate / self.user_rps), rotate=True)  # fmt: skip
            done = subprocess.run([*pin, *argv], capture_output=True, text=True, check=True, timeout=self.seconds + 60)
            window = {**json.loads(done.stdout), "round": after_round}
            self.windows.append(window)
            served = f"{window['achieved_rps']:7,.0f} served, utilization {window['utilization']:.3f}"
            print(f"    generator after round {after_round}: {rate:7,.0f} RPS offered, {served}", flush=True)


def crossing(windows: list[dict[str, Any]]) -> tuple[float, float | None, float | None] | None:
    """The generator's 90% crossing with its interval over passes: the sweep's own rounds fit and jackknife."""
    points = [RoundPoint(w["round"], w["achieved_rps"], w["utilization"]) for w in windows
              if w["achieved_rps"] >= 0.98 * w["offered_rps"] and 0.6 <= w["utilization"] < SATURATED]  # fmt: skip
    fit = rounds_fit(points)
    if fit is None:
        return None
    rounds = sorted({p.round for p in points})

    def knee_of(selected: Sequence[int]) -> float | None:
        part = [p for p in points if p.round in selected]
        sub = rounds_fit(part) or rounds_fit(part, exponent=fit.exponent)
        return sub.rps_at(THRESHOLD) if sub else None

    estimate = jackknife(rounds, knee_of)
    return fit.rps_at(THRESHOLD), estimate.low if estimate else None, estimate.high if estimate else None


def curve_gap(config: ConfigResult, windows: list[dict[str, Any]]) -> list[float]:
    """Each generator window's utilization over what the sweep's curve of the same round reads at its rate: above 1
    where the generator's requests cost Envoy more than Locust's, about 1 where the two loads cost the same and
    only the fits (their windows' ranges) set the crossings apart."""
    fit = find_knee(config.steps, THRESHOLD).fit
    if not isinstance(fit, RoundsFit):
        return []
    return [w["utilization"] / math.exp(fit.intercepts[w["round"]] + fit.exponent * math.log(w["achieved_rps"]))
            for w in windows if w["round"] in fit.intercepts and w["achieved_rps"] > 0]  # fmt: skip


def _gap_text(gaps: list[float]) -> str:
    if not gaps:
        return ""
    median, low, high = statistics.median(gaps), min(gaps), max(gaps)
    return f"; generator / the sweep's curve at the generator's rates, same round: {median:.3f} ({low:.3f}-{high:.3f})"


def one_run(cap: float, rounds: int, seconds: float, workers: int) -> tuple[ConfigResult, list[dict[str, Any]]]:
    data = scenario_with(cap)
    data["load"].update(rounds=rounds, workers=workers)
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-truth-") as folder:
        store = RunStore.create(scenario, Path(folder))
        platform = LocalPlatform(scenario, store.run_dir, free_ports=True)
        between = GeneratorBetweenRounds(platform, store, cap, seconds, scenario.load.max_rps_per_user)
        sweep = Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, observer=between)
        sweep.run()
    return store.summary.configs[0], between.windows


def describe(knee: Knee) -> str:
    interval = f"[{knee.low:,.0f}-{knee.high:,.0f}]" if knee.low is not None and knee.high is not None else "[none]"
    return f"{knee.rps:,.0f} {interval}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="0.25,0.5")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="generator window per rate")
    parser.add_argument("--workers", default="", help="Locust worker counts, comma-separated (default: the scenario's)")
    add_worker_loop_options(parser)
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")] if args.workers else [scenario_with(0.25)["load"]["workers"]]
    variants = [(workers, loop) for workers in counts for loop in worker_loops(args)]
    for cap in (float(c) for c in args.caps.split(",")):
        inside = dict.fromkeys(variants, 0)
        ratios: dict[tuple[int, WorkerLoop], list[float]] = {v: [] for v in variants}
        for run in range(1, args.runs + 1):
            turn = (run - 1) % len(variants)
            for workers, loop in variants[turn:] + variants[:turn]:
                with loop.environment():
                    config, windows = one_run(cap, args.rounds, args.seconds, workers)
                knee = config.valid_knee
                found = crossing(windows)
                name = f"cap {cap:g} {_variant(workers, loop)} run {run}"
                if knee is None or found is None:
                    why = config.reason if knee is None else "the generator's windows allow no fit"
                    print(f"{name}: {config.status}; {why}", flush=True)
                    continue
                truth, low, high = found
                ratios[(workers, loop)].append(knee.rps / truth)
                held = knee.low is not None and knee.high is not None and knee.low <= truth <= knee.high
                inside[(workers, loop)] += held
                truth_interval = f"[{low:,.0f}-{high:,.0f}]" if low is not None and high is not None else "[none]"
                gap = _gap_text(curve_gap(config, windows))
                print(f"{name}: sweep knee {describe(knee)}; generator crossing {truth:,.0f} {truth_interval} "
                      f"({len(windows)} windows); sweep / generator {knee.rps / truth:.3f}; "
                      f"crossing inside the sweep's interval: {'yes' if held else 'no'}{gap}", flush=True)  # fmt: skip
        for variant in variants:
            found_ratios = ratios[variant]
            summary = "no ratio"
            if found_ratios:
                median, low, high = statistics.median(found_ratios), min(found_ratios), max(found_ratios)
                summary = f"sweep / generator median {median:.3f} ({low:.3f}-{high:.3f})"
            print(f"cap {cap:g} {_variant(*variant)}: the generator's crossing inside the sweep's interval in "
                  f"{inside[variant]} of {len(found_ratios)} runs; {summary}", flush=True)  # fmt: skip


def _variant(workers: int, loop: WorkerLoop) -> str:
    return f"workers {workers}" + (f" {loop.label}" if loop.label else "")


if __name__ == "__main__":
    main()

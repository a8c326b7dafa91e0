"""Send clustering: are Locust's requests cheaper for Envoy because they arrive in clusters (bench/meter_bias.py)?

meter_bias found that at the same fixed rate, over the same number of keep-alive connections, Envoy spends 8-19%
less CPU per request on Locust's requests than on the Go generator's Poisson arrivals. The hypothesis: Locust's
gevent worker sends in clusters (several users' timers expire while it is busy and fire back to back in one loop
turn), so Envoy serves more requests per wake-up. This bench measures both halves on one Envoy, interleaved by
round at the same fixed rates:

- the arrival time of every request at Envoy's listener, captured on loopback by tcpdump (packets to the
  listener's port that carry payload, kernel time stamps in microseconds): per window, the index of dispersion
  of request counts in 1 ms and 10 ms bins (a Poisson stream gives 1), the share of gaps under 50 us and the
  median gap;
- Envoy's CPU per request over the same windows: cores from its cgroup's counter read every 0.2 s, divided by
  the requests the capture counted (one meter for every load);

for three loads: Locust's lean users as the sweep runs them (a fixed schedule in rounds), and between the rounds
the Go generator with Poisson arrivals and with Poisson clusters (`--arrivals clustered`: cluster starts Poisson
at rate/m, each cluster's requests at once on as many connections, sizes geometric with mean m, so counts in bins
wider than a cluster have dispersion 2m - 1). m is chosen per rate to match the dispersion of Locust's first
round in 1 ms bins (`--cluster-mean auto`: m = (D + 1) / 2), or given. It prints the medians over rounds with the spread
of the ratios paired by round (Locust / Go-poisson, Go-clustered / Go-poisson), and Locust's worker CPU.

`--workers 1,2`: Locust with that many worker processes (load.workers), to test whether the clustering comes from
one gevent loop waking on whole-millisecond epoll timeouts (the users of one worker fire on the same ticks;
several workers have independent ticks). With several counts, every round runs one short sweep per worker count
(order rotated per round), each on a fresh test bed with its own Go Poisson window per rate after Locust's, and
Locust's CPU per request is paired with the Go Poisson of its own sweep (same Envoy process); the Go clustered
mode is skipped then. One count (default 1) runs as before: one sweep, all three loads.

    .venv/bin/python bench/send_clustering.py [--cap 0.25] [--shares 0.55,0.7,0.85] [--rounds 4] [--seconds 10]
        [--cluster-mean auto|M] [--rates R1,R2 instead of locating the knee] [--workers 1 | 1,2]
        [--backends epoll/linux_iouring,epoll] [--timers fine/gevent]

`--backends`: the same, over the gevent loop backend of Locust's workers (GEVENT_BACKEND). libev's epoll backend
waits in whole milliseconds, so timers due within one fire together; its io_uring backend waits on a timerfd, to
the microsecond. `--timers fine/gevent`: the same, over the paced users' send timer (GATEWAY_SIZER_TIMER): a
timerfd armed at each send (locustfiles/fine_timer.py) or gevent.sleep.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _runs import GENERATOR_WARMUP_S, WorkerLoop, add_worker_loop_options, scenario_with, spread, worker_loops
from meter_bias import CgroupClock, locate
from openloop import command

from runner.model import Step
from runner.observer import SweepObserver
from runner.plan import Configuration, plan_sweep
from runner.platforms.local.layout import ENVOY_POD, WORKER_POD
from runner.platforms.local.platform import LocalPlatform
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep

SAMPLE_S = 0.2
SHORT_GAP_S = 50e-6
LOADS = ("locust", "poisson", "clustered")


def capture_command(port: int, pcap: Path) -> list[str]:
    """tcpdump of the packets to Envoy's listener that carry payload (requests), time stamps in microseconds."""
    payload = "(ip[2:2] - ((ip[0] & 0xf) << 2) - ((tcp[12] & 0xf0) >> 2)) != 0"
    return ["tcpdump", "-i", "lo", "-n", "-q", "-s", "80", "-B", "16384", "-Z", "root",
            "--time-stamp-precision=micro", "-w", str(pcap), f"tcp dst port {port} and {payload}"]  # fmt: skip


def read_times(pcap: Path) -> list[float]:
    """Time stamps (Unix seconds) of the complete records of a classic pcap file, in file order."""
    data = pcap.read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack_from("<I", data)[0]
    order = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    scale = 1e-9 if magic in (0xA1B23C4D, 0x4D3CB2A1) else 1e-6
    record = struct.Struct(order + "IIII")
    times, at = [], 24
    while at + 16 <= len(data):
        sec, frac, included, _ = record.unpack_from(data, at)
        if at + 16 + included > len(data):
            break
        times.append(sec + frac * scale)
        at += 16 + included
    return times


def arrivals(times: list[float], start: float, end: float) -> dict[str, float]:
    """Clustering of the arrivals in [start, end): dispersion of counts in 1 ms and 10 ms bins, gaps, rate."""
    inside = sorted(t for t in times if start <= t < end)
    figures: dict[str, float] = {"rps": len(inside) / (end - start)}
    for name, width in (("d1", 1e-3), ("d10", 1e-2)):
        bins = int((end - start) / width)
        counts = [0] * bins
        for t in inside:
            k = int((t - start) / width)
            if k < bins:
                counts[k] += 1
        mean = statistics.fmean(counts) if counts else 0.0
        figures[name] = statistics.pvariance(counts) / mean if mean > 0 else math.nan
    gaps = [b - a for a, b in itertools.pairwise(inside)]
    figures["short"] = sum(g < SHORT_GAP_S for g in gaps) / len(gaps) if gaps else math.nan
    figures["median_gap_us"] = statistics.median(gaps) * 1e6 if gaps else math.nan
    return figures


class Clustering(SweepObserver):
    """Captures requests at Envoy's listener and samples its cgroup from the first load; runs the Go generator
    (Poisson, then clustered, alternating which goes first) before every round but the first and after the last."""

    def __init__(self, platform: LocalPlatform, rates: list[float], cap: float, seconds: float, user_rps: float,
                 mean: str, folder: Path, *, workers: int = 1, modes: tuple[str, ...] = LOADS[1:],
                 label: str = "locust", round_: int | None = None):  # fmt: skip
        self.platform, self.rates, self.cap, self.seconds, self.user_rps = platform, rates, cap, seconds, user_rps
        self.mean, self.pcap = mean, folder / "requests.pcap"
        self.workers, self.modes, self.label, self.round = workers, modes, label, round_  # round_: this sweep's
        self.means: dict[float, float] = {}
        self.clock: CgroupClock | None = None
        self.worker_clock: CgroupClock | None = None  # every Locust worker's cgroup, summed
        self.capture: subprocess.Popen[str] | None = None
        self.locust: list[dict[str, Any]] = []  # windows: load, round, rate, start, end, worker cpu
        self.go: list[dict[str, Any]] = []

    def load_changed(self, level: Any, phase: str, seconds: float) -> None:
        if self.clock is not None:
            return
        testbed = self.platform.testbed
        containers = testbed.containers
        self.clock = CgroupClock(lambda: containers[ENVOY_POD].cgroup.cpu_usage_seconds())
        workers = [f"{WORKER_POD}-{i}" for i in range(self.workers)]
        self.worker_clock = CgroupClock(lambda: sum(containers[w].cgroup.cpu_usage_seconds() for w in workers))
        port = urlsplit(testbed.gateway_url).port or 80
        pin = ["taskset", "-c", testbed.placement.others_cpus] if testbed.placement.others_cpus else []
        self.capture = subprocess.Popen([*pin, *capture_command(port, self.pcap)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1)
        if self.capture.poll() is not None:
            raise SystemExit(f"tcpdump did not start: {self.capture.stderr.read() if self.capture.stderr else ''}")

    def step_measured(self, config: Configuration, step: Step) -> None:
        rate = min(self.rates, key=lambda r: abs(r - (step.target_rps or math.inf)))
        if step.target_rps is None or abs(step.target_rps - rate) >= 0.5:  # the plan's rates carry float noise
            return
        self.locust.append({"load": self.label, "round": self.round or step.round, "rate": rate, "users": step.users,
                            "start": step.started_at, "end": step.started_at + step.window_s,
                            "worker_cpu": step.generator_cpu_max, "locust_rps": step.rps})  # fmt: skip

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        if number > 1:
            self.run_generator(number - 1)

    def rounds_finished(self, rounds: int) -> None:
        self.run_generator(rounds)

    def stop(self) -> str:
        for clock in (self.clock, self.worker_clock):
            if clock is not None:
                clock.stopped.set()
        if self.capture is None:
            return ""
        self.capture.terminate()
        _, err = self.capture.communicate(timeout=30)
        return " ".join(line for line in err.splitlines() if "packets" in line)

    def choose_means(self) -> None:
        times = read_times(self.pcap)
        for rate in self.rates:
            if self.mean != "auto":
                self.means[rate] = float(self.mean)
                continue
            seen = [arrivals(times, w["start"], w["end"])["d1"] for w in self.locust if w["rate"] == rate]
            self.means[rate] = round(max(1.0, (statistics.median(seen) + 1) / 2), 2) if seen else 1.0
        print(f"Go clusters' mean size per rate (Locust's round 1, 1 ms bins): {self.means}", flush=True)

    def run_generator(self, round_: int) -> None:
        if not self.means and "clustered" in self.modes:
            self.choose_means()
        testbed = self.platform.testbed
        cgroup = testbed.containers[ENVOY_POD].cgroup
        pin = ["taskset", "-c", testbed.placement.others_cpus] if testbed.placement.others_cpus else []
        for i, rate in enumerate(self.rates):
            modes = list(self.modes) if (round_ + i) % 2 else list(reversed(self.modes))
            for mode in modes:
                mean = self.means[rate] if mode == "clustered" else None
                argv = command(testbed.gateway_url, rate, self.seconds, mode, cgroup.usage_folder,
                               cpu_cgroup=cgroup.throttling_folder, limit_cores=self.cap, warmup=GENERATOR_WARMUP_S,
                               connections=math.ceil(rate / self.user_rps), rotate=True, cluster_mean=mean)  # fmt: skip
                done = subprocess.run([*pin, *argv], capture_output=True, text=True, check=True,
                                      timeout=self.seconds + 60)  # fmt: skip
                result = json.loads(done.stdout)
                cpu = result["cpu"]
                self.go.append({"load": mode, "round": self.round or round_, "rate": rate, "mean": mean,
                                "start": cpu["window_start_unix"], "end": cpu["window_end_unix"],
                                "achieved_rps": result["achieved_rps"], "late": result["late_starts"],
                                "generator_us": result["generator"]["us_per_request"]})  # fmt: skip


def compare(cap: float, rates: list[float], rounds: int, seconds: float, mean: str, *, workers: int = 1,
            modes: tuple[str, ...] = LOADS[1:], label: str = "locust",
            round_: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One sweep of `rounds` rounds with Locust at `workers` worker processes and the Go generator in `modes`
    between them: every window with its arrival figures and Envoy's CPU per request."""
    data = scenario_with(cap, rounds=rounds, search="fixed", rps=rates, step_seconds=round(seconds),
                         warmup_seconds=3, settle_seconds=2, workers=workers)  # fmt: skip
    scenario = parse_scenario(data)
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-clustering-") as folder:
        store = RunStore.create(scenario, Path(folder))
        platform = LocalPlatform(scenario, store.run_dir, free_ports=True)
        observer = Clustering(platform, rates, cap, seconds, scenario.load.max_rps_per_user, mean, Path(folder),
                              workers=workers, modes=modes, label=label, round_=round_)  # fmt: skip
        try:
            Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, observer=observer).run()
        finally:
            drops = observer.stop()
        return measure(observer, drops, sweep=round_ or 0)  # reads the capture in `folder`


def measure(observer: Clustering, drops: str, sweep: int) -> list[dict[str, Any]]:
    """The windows of one sweep with their arrival figures, Envoy's CPU per request and the workers' cores."""
    assert observer.clock is not None and observer.worker_clock is not None
    times = read_times(observer.pcap)
    print(f"capture: {len(times):,} requests recorded; tcpdump: {drops or 'no counts'}", flush=True)
    windows = []
    for w in [*observer.locust, *observer.go]:
        figures = arrivals(times, w["start"], w["end"])
        cores = observer.clock.cores(w["start"], w["end"])
        us = cores / figures["rps"] * 1e6 if cores is not None and figures["rps"] > 0 else math.nan
        worker_cores = observer.worker_clock.cores(w["start"], w["end"]) if w["load"].startswith("locust") else None
        windows.append({**w, **figures, "us": us, "sweep": sweep, "workers": observer.workers,
                        "worker_cores": math.nan if worker_cores is None else worker_cores})  # fmt: skip
    return windows


def _med(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def report(rates: list[float], windows: list[dict[str, Any]], loads: list[str]) -> None:
    """Medians over rounds per rate and load; CPU per request over the Go Poisson of the same sweep and round."""
    print("rate    load        m    disp 1ms  disp 10ms  gaps<50us  median gap   Envoy us/req   served/s  "
          "(medians over rounds)", flush=True)  # fmt: skip
    for rate in rates:
        mine = [w for w in windows if w["rate"] == rate]
        for load in loads:
            these = [w for w in mine if w["load"] == load]
            if not these:
                continue
            m = f"{these[0]['mean']:.2f}" if load == "clustered" else "-"
            med = {key: _med([w[key] for w in these]) for key in ("d1", "d10", "short", "median_gap_us", "us", "rps")}
            extra = ""
            if load.startswith("locust"):
                extra = (f"  worker CPU {_med([w['worker_cpu'] for w in these]):.0%} (busiest), workers' cores "
                         f"{_med([w['worker_cores'] for w in these]):.3f}, users {these[0]['users']}")  # fmt: skip
            else:
                extra = f"  generator {_med([w['generator_us'] or math.nan for w in these]):.1f} us/req"
            print(f"{rate:6,.0f}  {load:10}{m:>4}  {med['d1']:8.2f}  {med['d10']:9.2f}  {med['short']:9.1%}  "
                  f"{med['median_gap_us']:8.0f} us  {med['us']:10.1f} us  {med['rps']:9,.0f}{extra}",
                  flush=True)  # fmt: skip
        ratios: dict[str, dict[int, float]] = {}  # load: round: CPU per request / the Go Poisson of its sweep
        for w in mine:
            if w["load"] == "poisson" or math.isnan(w["us"]):
                continue
            base = [
                p["us"] for p in mine if p["load"] == "poisson" and (p["sweep"], p["round"]) == (w["sweep"], w["round"])
            ]
            if base and not math.isnan(base[0]):
                ratios.setdefault(w["load"], {})[w["round"]] = w["us"] / base[0]
        others = [load for load in loads if load != "poisson"]
        full = sorted(set.intersection(*(set(ratios.get(load, {})) for load in others))) if others else []
        if not full:
            print(f"{rate:6,.0f}  (no round with all the loads)", flush=True)
            continue
        several = "clustered" not in others  # Locust at several worker counts: show every round's ratio
        text = []
        for load in others:
            values = [ratios[load][r] for r in full]
            name = "Locust" if load == "locust" else "Go-clustered" if load == "clustered" else f"Locust {load[7:]}"
            rounds_ = f" [{', '.join(f'{v:.3f}' for v in values)}]" if several else ""
            text.append(f"{name} / Go-poisson {statistics.median(values):.3f} (+-{spread(values) / 2:.1%}){rounds_}")
        print(f"{rate:6,.0f}  CPU per request paired by round: {', '.join(text)}   ({len(full)} rounds)", flush=True)
        if several and len(others) > 1:
            first = others[0]
            for load in others[1:]:
                moved = [ratios[load][r] / ratios[first][r] for r in full]
                print(f"{rate:6,.0f}  {load} against {first}, each over its Go Poisson: "
                      f"{statistics.median(moved):.3f} (+-{spread(moved) / 2:.1%}) "
                      f"[{', '.join(f'{v:.3f}' for v in moved)}]", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.25)
    parser.add_argument("--shares", default="0.55,0.7,0.85", help="rates as shares of the located knee")
    parser.add_argument("--rates", default="", help="fixed rates (RPS, comma-separated) instead of locating the knee")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cluster-mean", default="auto", help="mean size of the Go clusters, or auto: from Locust's")
    parser.add_argument("--workers", default="1", help="Locust worker processes (load.workers), comma-separated: "
                        "several run one sweep per count and round, with Go Poisson only")  # fmt: skip
    add_worker_loop_options(parser)
    args = parser.parse_args()
    if args.cluster_mean != "auto":
        try:
            if not float(args.cluster_mean) >= 1:
                raise ValueError
        except ValueError:
            parser.error("--cluster-mean is auto or a number >= 1")
    try:
        counts = [int(n) for n in args.workers.split(",")]
        if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
            raise ValueError
    except ValueError:
        parser.error("--workers is a comma-separated list of distinct counts >= 1")
    if shutil.which("tcpdump") is None:
        raise SystemExit("needs tcpdump (apt-get install tcpdump) and root to capture on loopback")
    if args.rates:
        rates = [round(float(rate)) for rate in args.rates.split(",")]
        print(f"cap {args.cap:g}: rates {rates} as given", flush=True)
    else:
        knee = locate(args.cap)
        rates = [round(knee * float(share)) for share in args.shares.split(",")]
        print(f"cap {args.cap:g}: knee located at {knee:,.0f} RPS; rates {rates}", flush=True)
    floats = [float(r) for r in rates]
    loops = worker_loops(args)
    if len(counts) == 1 and loops == [WorkerLoop()]:
        windows = compare(args.cap, floats, args.rounds, args.seconds, args.cluster_mean, workers=counts[0])
        report(floats, windows, list(LOADS))
        return
    variants = [(workers, loop) for workers in counts for loop in loops]
    print(f"Locust {[_label(*v) for v in variants]}: one sweep each per round, Go Poisson only (no clustered mode)",
          flush=True)  # fmt: skip
    windows = []
    for round_ in range(1, args.rounds + 1):
        shift = (round_ - 1) % len(variants)
        for workers, loop in variants[shift:] + variants[:shift]:
            label = _label(workers, loop)
            print(f"round {round_}: {label}", flush=True)
            with loop.environment():
                got = compare(args.cap, floats, 1, args.seconds, args.cluster_mean, workers=workers,
                              modes=("poisson",), label=label, round_=round_)  # fmt: skip
            for w in got:  # every Go Poisson window is paired with the Locust of its own sweep
                w["sweep"] = (round_, label)
            windows += got
    report(floats, windows, [*(_label(*v) for v in variants), "poisson"])


def _label(workers: int, loop: WorkerLoop) -> str:
    return f"locust x{workers}" + (f" {loop.label}" if loop.label else "")


if __name__ == "__main__":
    main()

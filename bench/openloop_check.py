"""Checks of the open-loop generator (bench/openloop/) against a real nginx and Envoy on loopback.

    .venv/bin/python bench/openloop_check.py [--cap 0.5] [--rate 1000] [--seconds 10] [--http-cost]

- rate: each arrival model at `--rate` through Envoy: achieved vs offered and vs scheduled RPS (a Poisson
  run's own arrival count varies by sqrt(n), 1% of 10,000 requests: its z-score is printed);
- poisson: the intended send times the generator dumps: coefficient of variation of the gaps (1 for
  exponential gaps), a Kolmogorov-Smirnov test against the exponential law of the offered rate, and the
  variance/mean of the counts per 100 ms (1 for a Poisson process);
- cpu: the generator's Envoy CPU figures against Envoy's cgroup counter read by the runner's own Cgroup
  class every 20 ms, interpolated at the generator's window edges;
- refusal: non-loopback targets exit 2 with one line;
- --http-cost: generator CPU per request, raw net.Conn vs net/http, against nginx, interleaved rounds.

Load runs are short; run on a quiet machine for figures that mean something.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from _runs import LocalTestbed, Ports
from openloop import build, run

from runner.platforms.local.cgroups import Cgroup

MODELS = ("uniform", "poisson", "synchronized")


def ks_exponential(gaps: list[float], rate: float) -> tuple[float, float]:
    """KS distance of the gaps from Exp(rate) and its p-value (Kolmogorov's series, Stephens' correction)."""
    values = sorted(gaps)
    n = len(values)
    distance = 0.0
    for i, gap in enumerate(values):
        cdf = 1.0 - math.exp(-rate * gap)
        distance = max(distance, (i + 1) / n - cdf, cdf - i / n)
    x = distance * (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n))
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * x * x) for k in range(1, 101))
    return distance, min(1.0, max(0.0, p))


def check_poisson(url: str, rate: float, seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="openloop-check-") as folder:
        dump = Path(folder) / "intended.txt"
        result = run(url, rate, seconds, "poisson", warmup=0, dump_intended=dump)
        times = [int(line) / 1e9 for line in dump.read_text().split()]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    distance, p = ks_exponential(gaps, rate)
    start, bins = times[0], [0] * int((times[-1] - times[0]) / 0.1)
    for t in times:
        if int((t - start) / 0.1) < len(bins):
            bins[int((t - start) / 0.1)] += 1
    dispersion = statistics.pvariance(bins) / statistics.fmean(bins)
    print(f"poisson  {len(gaps):,} gaps at {rate:g}/s (seed {result['seed']}): mean gap {mean * 1e3:.4f} ms "
          f"(1/rate {1e3 / rate:.4f}), CV {cv:.4f}, KS D {distance:.4f} p {p:.3f}, "
          f"counts per 100 ms variance/mean {dispersion:.3f} over {len(bins)} bins", flush=True)  # fmt: skip


class CounterSampler:
    """Reads a cgroup's CPU counter (the runner's Cgroup class) every 20 ms with the wall-clock time."""

    def __init__(self, cgroup: Cgroup) -> None:
        self.cgroup, self._stop = cgroup, threading.Event()
        self.points: list[tuple[float, float]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.points.append((time.time(), self.cgroup.cpu_usage_seconds()))
            time.sleep(0.02)

    def __enter__(self) -> CounterSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, wall: float) -> float:
        """The counter (seconds) interpolated at a wall-clock time."""
        times = [t for t, _ in self.points]
        i = bisect.bisect_left(times, wall)
        (t0, u0), (t1, u1) = self.points[max(0, i - 1)], self.points[min(i, len(self.points) - 1)]
        return u0 if t1 == t0 else u0 + (u1 - u0) * (wall - t0) / (t1 - t0)


def check_rates_and_cpu(testbed: LocalTestbed, cap: float, rate: float, seconds: float) -> None:
    envoy = testbed.containers["envoy-local"].cgroup
    cgroup = envoy.usage_folder
    for model in MODELS:
        with CounterSampler(envoy) as sampler:
            result = run(testbed.gateway_url, rate, seconds, model, cgroup=cgroup, limit_cores=cap)
        cpu, n = result["cpu"], result["scheduled"]
        z = (n - rate * seconds) / math.sqrt(rate * seconds)
        print(f"rate     {model:<12} offered {rate:,.0f}  scheduled {result['scheduled_rps']:,.1f} (z {z:+.2f})  "
              f"achieved {result['achieved_rps']:,.1f}  achieved/offered {result['achieved_rps'] / rate:.4f}  "
              f"achieved/scheduled {result['achieved_rps'] / result['scheduled_rps']:.4f}  failed {result['failed']}  "
              f"late {result['late_starts']}  p50/p99 {result['latency_ms']['p50']}/{result['latency_ms']['p99']} ms  "
              f"conns {result['connections']['used']}  generator {result['generator']['us_per_request']} us/req",
              flush=True)  # fmt: skip
        start, end = sampler.at(cpu["window_start_unix"]), sampler.at(cpu["window_end_unix"])
        python_cores = (end - start) / (cpu["window_end_unix"] - cpu["window_start_unix"])
        samples = statistics.fmean(s["cores"] for s in cpu["samples"])
        print(f"cpu      {model:<12} generator: {cpu['cores']:.4f} cores ({result['utilization']:.1%} of {cap}), "
              f"{cpu['us_per_request']} us/req, throttled {cpu['nr_throttled']}/{cpu['nr_periods']} periods, "
              f"mean of per-second samples {samples:.4f}; cgroup counter read by the runner: {python_cores:.4f} "
              f"cores (ratio {cpu['cores'] / python_cores:.4f}), start {start * 1e6:,.0f} vs "
              f"{cpu['usage_start_us']:,.0f} us, end {end * 1e6:,.0f} vs {cpu['usage_end_us']:,.0f} us",
              flush=True)  # fmt: skip


def check_refusal() -> None:
    for url in ("http://10.0.0.1:80", "http://192.168.1.1:8080", "http://localhost:80", "https://127.0.0.1:443"):
        done = subprocess.run([str(build()), "--url", url, "--rate", "10", "--duration", "1", "--arrivals", "uniform"],
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        lines = done.stderr.strip().splitlines()
        print(f"refusal  {url:<26} exit {done.returncode}, {len(lines)} line: {lines[0] if lines else ''}", flush=True)


def check_http_cost(url: str, rate: float, seconds: float, rounds: int) -> None:
    found: dict[str, list[float]] = {"raw": [], "nethttp": []}
    for index in range(rounds):
        for http in ("raw", "nethttp") if index % 2 == 0 else ("nethttp", "raw"):
            result = run(url, rate, seconds, "poisson", warmup=1, http=http)
            found[http].append(result["generator"]["us_per_request"])
    medians = {http: statistics.median(values) for http, values in found.items()}
    print(f"http     generator CPU per request at {rate:,.0f}/s poisson against nginx, median of {rounds}: "
          f"raw {medians['raw']:.1f} us ({found['raw']}), nethttp {medians['nethttp']:.1f} us ({found['nethttp']}), "
          f"nethttp/raw {medians['nethttp'] / medians['raw']:.2f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=0.5, help="Envoy's CPU limit, cores")
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--http-cost", action="store_true", help="also compare raw and net/http generator cost")
    parser.add_argument("--cost-rate", type=float, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build()
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    check_refusal()
    with tempfile.TemporaryDirectory(prefix="openloop-check-") as folder:
        testbed = LocalTestbed(workdir=Path(folder), ports=Ports.free(), testbed_id=f"bench-{os.getpid()}")
        try:
            testbed.scale_backend(1)
            testbed.start_envoy(args.cap, 256 * 2**20, 1)
            check_poisson(testbed.backend_url(), args.rate, min(args.seconds, 5))
            check_rates_and_cpu(testbed, args.cap, args.rate, args.seconds)
            if args.http_cost:
                check_http_cost(testbed.backend_url(), args.cost_rate, 4, args.rounds)
        finally:
            testbed.stop()
    print(f"load average {os.getloadavg()[0]:.2f} at end", flush=True)


if __name__ == "__main__":
    main()

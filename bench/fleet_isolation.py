"""Does production's own traffic move the sizing fleet's knee? Sweeps of the classic install's sizing fleet on the
one-machine cluster (`make cluster-up`), alternately without and with a steady load sent to the production Envoy
by a generator that is not the sweep's (GETs to production's ClusterIP, an address of the cluster on this machine).

    .venv/bin/python bench/fleet_isolation.py                        # 1 pair, Envoy 300m, 3 rounds each
    .venv/bin/python bench/fleet_isolation.py --pairs 2 --rps 50
    .venv/bin/python bench/fleet_isolation.py --rounds 1 --short    # a smoke run: short windows, no figure

Per sweep it prints the fleet's knee with its interval, production's request rate over the sweep (its own Envoy's
counter through Prometheus), how many windows carried a guard and the node's speed before it (the reference loop the
local platform times, runner/platforms/local/speed.py: the one-machine cluster's node is this machine); then whether
each loaded knee lies inside the unloaded knee's interval of its pair, the intervals' overlap, and how far the knee
and the machine's speed moved between the pair's two sweeps (a knee's interval holds the drift within its sweep, not
between two). Pairs alternate which sweep goes first, so a machine slowing down through the run does not always
land on the loaded one. Needs root and the cluster up; nothing else
measuring on the machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from runner.model import ConfigResult
from runner.paths import PROJECT_ROOT, SCENARIO_DIR
from runner.platforms.local.speed import reference_speed
from runner.results import load_summary

PROMETHEUS = "http://10.96.0.90:9090"
KUBECONFIG = Path.home() / ".cache" / "gateway-sizer" / "cluster" / "admin.kubeconfig"
PRODUCTION_REQUESTS = 'sum(envoy_http_downstream_rq_total{namespace="projectcontour",pod=~"envoy-[a-z0-9]{5}"})'


def production_requests() -> float:
    """Production Envoy's request counter now, summed over its pods (Prometheus's latest scrape)."""
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": PRODUCTION_REQUESTS})
    with urllib.request.urlopen(url, timeout=10) as answer:
        result = json.loads(answer.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def production_address() -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from kubernetes import client, config; config.load_kube_config();"
            "print(client.CoreV1Api().read_namespaced_service('envoy', 'projectcontour').spec.cluster_ip)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )
    return out.stdout.strip()


def steady_load(address: str, rps: float, stop: threading.Event) -> None:
    """GETs with the test bed's Host header over one keep-alive connection at `rps`, until `stop` (at most 1 h)."""
    started, sent = time.monotonic(), 0
    connection = http.client.HTTPConnection(address, 80, timeout=5)
    while not stop.is_set() and time.monotonic() - started < 3600:
        if (wait := started + sent / rps - time.monotonic()) > 0:
            stop.wait(wait)
        sent += 1
        try:
            connection.request("GET", "/", headers={"Host": "external.nginx"})
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection(address, 80, timeout=5)


SHORT = {"step_seconds": 6, "warmup_seconds": 2, "settle_seconds": 1, "max_steps": 2}  # --short: the smoke run's


def sweep(folder: Path, cpu: float, rounds: int, short: bool) -> ConfigResult:
    data = yaml.safe_load((SCENARIO_DIR / "local.yaml").read_text())
    data.update(platform="kubernetes")
    data["envoy"].pop("isolation", None)
    data["envoy"]["cpu"] = [cpu]
    data["load"].update(rounds=rounds, **(SHORT if short else {}))
    data["prometheus"]["scrape_interval_seconds"] = 2
    scenario = folder / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(data))
    subprocess.run(
        [sys.executable, "-m", "runner", "sweep", "--scenario", str(scenario), "--results", str(folder)],
        cwd=PROJECT_ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "KUBECONFIG": str(KUBECONFIG)},
    )
    (config,) = load_summary((folder / "latest").resolve()).configs
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--rps", type=float, default=30.0, help="production's steady load")
    parser.add_argument("--cpu", type=float, default=0.3, help="the fleet's Envoy CPU limit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--short", action="store_true", help="6 s windows (3 scrapes), at most 2 a sweep: a smoke run, no figure"
    )
    args = parser.parse_args()
    address = production_address()
    rows = []
    for pair in range(args.pairs):
        knees, speeds = {}, {}
        for loaded in (False, True) if pair % 2 == 0 else (True, False):
            speeds[loaded] = reference_speed()
            stop = threading.Event()
            generator = threading.Thread(target=steady_load, args=(address, args.rps, stop), daemon=True)
            if loaded:
                generator.start()
            before, started = production_requests(), time.time()
            with tempfile.TemporaryDirectory() as folder:
                config = sweep(Path(folder), args.cpu, args.rounds, args.short)
            stop.set()
            production = (production_requests() - before) / (time.time() - started)
            knee = config.knee
            guarded = sum(1 for s in config.steps if s.guards)
            interval = f"{knee.low:,.0f}-{knee.high:,.0f}" if knee and knee.interval else "no interval"
            print(
                f"pair {pair + 1} {'loaded' if loaded else 'quiet '}: knee {knee.rps if knee else 0:,.0f} RPS "
                f"({interval}), {config.status}; production served {production:.1f} RPS over the sweep; "
                f"{guarded} of {len(config.steps)} windows with a guard; node speed before it {speeds[loaded]:.1f} M/s"
            )
            knees[loaded] = knee
        quiet, loaded_knee = knees[False], knees[True]
        if quiet and loaded_knee and quiet.interval and loaded_knee.interval:
            (low, high), (loaded_low, loaded_high) = quiet.interval, loaded_knee.interval
            inside = low <= loaded_knee.rps <= high
            overlap = loaded_low <= high and low <= loaded_high
            rows.append((inside, overlap))
            print(
                f"pair {pair + 1}: loaded knee inside the quiet one's interval: {inside}; overlap: {overlap}; "
                f"loaded/quiet knee {loaded_knee.rps / quiet.rps:.2f}, node speed {speeds[True] / speeds[False]:.2f}"
            )
    if rows:
        print(f"{sum(r[0] for r in rows)} of {len(rows)} loaded knees inside; {sum(r[1] for r in rows)} overlap")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

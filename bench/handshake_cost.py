"""The handshake's cost: what a request that opens a new TLS connection (tls-new-connection: an RSA-2048 handshake
and a TCP accept per request) adds to Envoy's CPU against a keep-alive TLS request (tls), at one CPU limit, over
several runs. Each run is one sweep of both profiles on a fixed schedule of two rates far below their knees; per
profile the CPU one more request per second adds is the slope between the two windows (Envoy's idle CPU, the same
at both, cancels: runner.figures.added_us_per_request). Per run: both slopes and their ratio; then the medians and
their spread. After each run it times one RSA-2048 signature on this machine (runner.certificates.rsa_signature_us,
the part of a full handshake every one pays) and prints what the handshake added in signatures: the figure behind
the nightly check that a handshake per request adds at least one signature's CPU to a keep-alive TLS request
(tests/local/test_profiles_sweep.py).

    .venv/bin/python bench/handshake_cost.py [--runs 5] [--cap 0.3] [--rates 20,80]
"""

from __future__ import annotations

import argparse
import statistics

import yaml
from _runs import TINY, run_sweep, spread

from runner.certificates import rsa_signature_us
from runner.figures import added_us_per_request
from runner.paths import SCENARIO_DIR

PROFILES = ("tls", "tls-new-connection")


def scenario(cap: float, rates: list[float]) -> dict:
    """scenarios/profiles.yaml with the two TLS profiles at one limit, the rates as a fixed uniform schedule."""
    data = yaml.safe_load((SCENARIO_DIR / "profiles.yaml").read_text())
    data.update(profiles=list(PROFILES))
    data["envoy"]["cpu"] = [cap]
    window = {"step_seconds": 2, "warmup_seconds": 1} if TINY else {"step_seconds": 8, "warmup_seconds": 2}
    data["load"].update(search="fixed", rps=rates, arrivals="uniform", settle_seconds=1, rounds=1, **window)
    data["baseline"] = {"enabled": False}
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cap", type=float, default=0.3, help="Envoy's CPU limit in cores")
    parser.add_argument("--rates", default="20,80", help="the two fixed rates (RPS), below both profiles' knees")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    slopes: dict[str, list[float]] = {name: [] for name in PROFILES}
    ratios: list[float] = []
    signatures: list[float] = []  # what a handshake added over keep-alive, in RSA-2048 signatures timed after the run
    for run in range(1, args.runs + 1):
        summary, wall = run_sweep(scenario(args.cap, rates))
        configs = {c.profile.name: c for c in summary.configs}
        served = all(len(c.steps) == len(rates) and not any(s.guards for s in c.steps) for c in configs.values())
        if set(configs) != set(PROFILES) or not served:
            reasons = "; ".join(f"{name}: {c.status} {c.reason or ''}" for name, c in configs.items())
            print(f"run {run} ({wall:.0f} s): not every window served clean, left out ({reasons})", flush=True)
            continue
        cost = {name: added_us_per_request(configs[name].steps) for name in PROFILES}
        for name in PROFILES:
            slopes[name].append(cost[name])
        ratio = cost["tls-new-connection"] / cost["tls"] if cost["tls"] > 0 else float("nan")
        ratios.append(ratio)
        sign_us = rsa_signature_us()
        signatures.append((cost["tls-new-connection"] - cost["tls"]) / sign_us)
        print(
            f"run {run} ({wall:.0f} s): tls {cost['tls']:,.0f} us, tls-new-connection "
            f"{cost['tls-new-connection']:,.0f} us per added request; ratio {ratio:.2f}; an RSA-2048 signature "
            f"{sign_us:,.0f} us, the handshake added {signatures[-1]:.2f} of them",
            flush=True,
        )
    if not ratios:
        raise SystemExit("no run served every window clean: no figure (a busy machine, or rates past a knee)")
    medians = {name: statistics.median(values) for name, values in slopes.items()}
    print(
        f"cap {args.cap:g}, rates {rates}, {len(ratios)} runs: tls {medians['tls']:,.0f} us, tls-new-connection "
        f"{medians['tls-new-connection']:,.0f} us (spread {spread(slopes['tls']):.0%}, "
        f"{spread(slopes['tls-new-connection']):.0%}); handshake / keep-alive median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}); added per handshake in RSA-2048 signatures median "
        f"{statistics.median(signatures):.2f} (min {min(signatures):.2f}, max {max(signatures):.2f})",
        flush=True,
    )


if __name__ == "__main__":
    main()

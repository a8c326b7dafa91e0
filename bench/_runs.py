"""Helpers the benchmarks share: run a real sweep through the CLI, measure Envoy's capacity with wrk."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.platforms.local.testbed import LocalTestbed, Ports  # noqa: E402

_WRK_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")


def scenario_with(envoy_cpu: float, **load: Any) -> dict[str, Any]:
    """The default local scenario at one Envoy CPU limit, with some `load` fields replaced."""
    data = yaml.safe_load((REPO / "scenarios" / "local.yaml").read_text())
    data["envoy"]["cpu"] = [envoy_cpu]
    data["load"] = {**data.get("load", {}), **load}
    data["baseline"] = {"enabled": False}
    return data


def run_sweep(scenario: dict[str, Any], *args: str) -> tuple[dict[str, Any], float]:
    """Run `gateway-sizer sweep` on a scenario; returns its summary and the wall time in seconds."""
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-bench-") as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        start = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "runner", "sweep", "--scenario", str(path), "--free-ports", "--results", folder,
             *args],
            cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        wall = time.monotonic() - start
        summary_path = Path(folder) / "latest" / "summary.json"
        if result.returncode != 0 or not summary_path.exists():
            raise RuntimeError(f"sweep failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        return json.loads(summary_path.read_text()), wall


def wrk_capacity(cpu_cores: float, headers: dict[str, str], connections: tuple[int, ...] = (8, 32, 64),
                 seconds: int = 8, rounds: int = 3) -> dict[int, float]:  # fmt: skip
    """Envoy's saturated RPS at a CPU limit, measured by wrk (closed loop): median per connection count.

    `headers` are the ones the sweep's requests carry: with Accept-Encoding gzip Envoy compresses every
    answer, which costs it more CPU than the rest of the request.
    """
    testbed = LocalTestbed(workdir=Path(tempfile.mkdtemp(prefix="gateway-sizer-wrk-")), ports=Ports.free(),
                           testbed_id=f"bench-{os.getpid()}")  # fmt: skip
    try:
        testbed.scale_backend(1)
        testbed.start_envoy(cpu_cores, 256 * 2**20, 1)
        found: dict[int, list[float]] = {c: [] for c in connections}
        for _ in range(rounds):
            for count in connections:
                out = subprocess.run(
                    ["wrk", "-t1", f"-c{count}", f"-d{seconds}s",
                     *(arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")),
                     testbed.gateway_url + "/"],
                    capture_output=True, text=True, check=True,
                ).stdout  # fmt: skip
                match = _WRK_RPS.search(out)
                if match:
                    found[count].append(float(match.group(1)))
        return {count: statistics.median(values) for count, values in found.items() if values}
    finally:
        testbed.stop()


def request_headers(scenario: dict[str, Any]) -> dict[str, str]:
    """The Host and Accept-Encoding headers the scenario's Locust users send.

    The rule of `request_headers` in locustfiles/gateway.py, which is not imported here: importing Locust
    monkey-patches this process with gevent.
    """
    from runner.scenario import LoadSpec

    load = LoadSpec.model_validate(scenario["load"])
    return {"Host": load.host_header, "Accept-Encoding": load.accept_encoding or "identity"}


def windows(summary: dict[str, Any], index: int = 0) -> int:
    """Measuring windows (steps) a configuration took."""
    return len(summary["configs"][index]["steps"])


def knee(summary: dict[str, Any], index: int = 0) -> float | None:
    config = summary["configs"][index]
    return config["knee"]["rps"] if config["status"] == "saturated" and config["knee"] else None

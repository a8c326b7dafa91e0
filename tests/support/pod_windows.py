"""Windows of real Envoy fleets, recorded as Prometheus and Locust answered them, and replayed through the meter.

`record` runs the local test bed (real Envoy pods, nginx, Locust, Prometheus) and measures windows with the real
StepMeter while keeping every answer it was given: each Prometheus query's result and the two Locust snapshots a
window reads. `ReplayedPrometheus` (a Metrics whose `_fetch` answers from the recording, not a Prometheus) and
`measure` then give any version of the meter the very same window to read, so a test can say what this version
makes of it and compare it with what another version made of it (saved beside it as `main_steps`).

    PYTHONPATH=tests .venv/bin/python -m support.pod_windows record tests/unit/data/pod_windows.json
    PYTHONPATH=<checkout> .venv/bin/python -m support.pod_windows steps tests/unit/data/pod_windows.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runner.locust import LocustOptions, Snapshot
from runner.measure import StepMeter
from runner.metrics import Metrics
from runner.model import LoadLevel, Step

LOCUSTFILE = Path(__file__).resolve().parents[2] / "locustfiles" / "gateway.py"
LIMIT = 0.25
WINDOW_S = 6
SETTLE_S = 4
RAMP_STEP = 1.2  # the two-pod ramp's offered rate grows by this much per window ...
RAMP_END = 0.97  # ... until its busiest pod reads this much of its limit
RAMP_WINDOWS = 16
# name: (pods, the first offered rate, whether it ramps): one pod at three rates, three pods near 30% of their limit
# each, two pods ramped from far below the summed reading's crossing to past the busiest pod's
PLAN: dict[str, tuple[int, list[float], bool]] = {
    "one-pod": (1, [150.0, 300.0, 450.0], False),
    "three-pods": (3, [300.0, 380.0, 460.0], False),
    "two-pod-ramp": (2, [150.0], True),
}


def _snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    data = dataclasses.asdict(snapshot)
    data["workers"] = [{**w, "cpu_usage": w.pop("cpu_percent")} for w in data["workers"]]
    return data


class ReplayedPrometheus(Metrics):
    """A Metrics client whose queries are answered from a recording (a stand-in for Prometheus, for replay only)."""

    def __init__(self, answers: list[list[Any]], scrape_interval_s: float = 1.0) -> None:
        super().__init__("http://recorded-prometheus", scrape_interval_s=scrape_interval_s)
        self.answers = {(query, round(float(at), 3)): result for query, at, result in answers}

    def _fetch(self, query: str, at: float) -> list[dict[str, Any]]:
        return list(self.answers[(query, round(at, 3))])


class _RecordingPrometheus(Metrics):
    """The real Prometheus client, keeping every answer it gets."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.answers: list[list[Any]] = []

    def _fetch(self, query: str, at: float) -> list[dict[str, Any]]:
        result = super()._fetch(query, at)
        self.answers.append([query, round(at, 3), result])
        return result


class _RecordingMeter(StepMeter):
    """The real meter, keeping what each window's figures were computed from."""

    windows: list[dict[str, Any]]

    def measure(self, index: int, level: LoadLevel, window_s: float) -> Step:
        assert isinstance(self.metrics, _RecordingPrometheus)
        self.metrics.answers.clear()  # the window's answers only (its CPU samples are asked before _step)
        return super().measure(index, level, window_s)

    def _step(self, index, level, start, end, before, after, spacing):  # type: ignore[no-untyped-def]
        assert isinstance(self.metrics, _RecordingPrometheus)
        step = super()._step(index, level, start, end, before, after, spacing)
        self.windows[-1].update(
            level={"users": level.users, "user_rps": level.user_rps},
            start=start,
            end=end,
            spacing=spacing,
            before=_snapshot_json(before),
            after=_snapshot_json(after),
            answers=list(self.metrics.answers),
        )
        return step


def measure(window: dict[str, Any], limit_cores: float = LIMIT) -> Step:
    """What this version of the meter makes of a recorded window."""
    from runner.platforms.local.layout import SELECTORS

    metrics = ReplayedPrometheus(window["answers"])
    meter = StepMeter(locust=None, metrics=metrics, selectors=SELECTORS, envoy_cpu_limit_cores=limit_cores)  # type: ignore[arg-type]
    level = LoadLevel(users=window["level"]["users"], user_rps=window["level"]["user_rps"])
    before, after = Snapshot.from_json(window["before"]), Snapshot.from_json(window["after"])
    return meter._step(window["index"], level, window["start"], window["end"], before, after, window["spacing"])


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _rates(first: list[float], ramp: bool, steps: list[Step]) -> float | None:
    """The next offered rate of a set: its list, or on a ramp RAMP_STEP over the last until the busiest pod reads
    RAMP_END of its limit (or RAMP_WINDOWS windows)."""
    if not ramp:
        return first[len(steps)] if len(steps) < len(first) else None
    if not steps:
        return first[0]
    if steps[-1].cpu_utilization_mean >= RAMP_END or len(steps) >= RAMP_WINDOWS:
        return None
    return (steps[-1].target_rps or 0.0) * RAMP_STEP


def _record(path: Path) -> None:
    """Record every set of PLAN on a fresh local test bed, windows of WINDOW_S seconds."""
    from runner.platforms.local.layout import SELECTORS
    from runner.platforms.local.testbed import LocalTestbed, LocustSetup, Ports

    workdir = Path(tempfile.mkdtemp(prefix="pod-windows-"))
    testbed = LocalTestbed(workdir=workdir, ports=Ports.free(), testbed_id=f"pod-windows-{os.getpid()}")
    recorded: dict[str, Any] = {"limit_cores": LIMIT, "window_s": WINDOW_S, "sets": {}}
    try:
        testbed.start_monitoring()
        testbed.scale_backend(1)
        options = LocustOptions("external.nginx", "/", user_rps=10)
        locust = testbed.start_locust(LocustSetup(LOCUSTFILE, "LeanGatewayUser", options, workers=1))
        metrics = _RecordingPrometheus(testbed.prometheus_url)
        meter = _RecordingMeter(locust=locust, metrics=metrics, selectors=SELECTORS, envoy_cpu_limit_cores=LIMIT)
        for name, (pods, first, ramp) in PLAN.items():
            testbed.start_envoy(LIMIT, 256 * 2**20, 1, replicas=pods)
            time.sleep(SETTLE_S)  # Prometheus finds the pods' scrape targets
            windows: list[dict[str, Any]] = []
            steps: list[Step] = []
            meter.windows = windows
            while (rate := _rates(first, ramp, steps)) is not None:
                users = max(10 * pods, math.ceil(rate / 10))  # many connections: the kernel spreads them evenly
                level = LoadLevel(users=users, user_rps=rate / users)
                locust.swarm(users, 200, testbed.gateway_url, dataclasses.replace(options, user_rps=level.user_rps))
                time.sleep(SETTLE_S)
                windows.append({"index": len(steps), "pods": pods})
                steps.append(meter.measure(len(steps), level, WINDOW_S))
                pods_read = " ".join(f"{p.cpu_utilization_mean:.2f}" for p in steps[-1].pods)
                print(f"{name}: {rate:,.0f} offered, {steps[-1].rps:,.0f} RPS, pods {pods_read}", flush=True)
            locust.stop()
            recorded["sets"][name] = {"pods": pods, "windows": windows}
    finally:
        testbed.stop()
    path.write_text(json.dumps(recorded))


def _main_steps(path: Path) -> None:
    """Add what the meter of the checkout on PYTHONPATH makes of every recorded window (`main_steps`)."""
    data = load(path)
    checkout = Path(sys.modules["runner"].__file__ or ".").parent
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=checkout).stdout.strip()
    data["main_steps"] = {
        "commit": commit,
        "sets": {
            name: [measure(w, data["limit_cores"]).model_dump(mode="json") for w in found["windows"]]
            for name, found in data["sets"].items()
        },
    }
    path.write_text(json.dumps(data))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["record", "steps"])
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.what == "record":
        _record(args.path)
    else:
        _main_steps(args.path)

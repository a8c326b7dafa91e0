"""Helpers the benchmarks share: run a real sweep through the CLI, read its typed summary, summarise figures.

Run the benchmarks with the project's virtualenv from the repository (`.venv/bin/python bench/<name>.py`):
the `runner` package is installed there, and bench/ is on the path as the script's own folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.locust import LOOP_ENV, TIMER_ENV
from runner.model import ConfigResult, Knee, RunSummary
from runner.paths import PROJECT_ROOT, SCENARIO_DIR
from runner.platforms.local.testbed import LocalTestbed, Ports
from runner.results import load_summary

REPO = PROJECT_ROOT
__all__ = [
    "GENERATOR_WARMUP_S",
    "REPO",
    "TINY",
    "LocalTestbed",
    "Ports",
    "WorkerLoop",
    "add_worker_loop_options",
    "all_overlap",
    "default_scenario",
    "run_sweep",
    "scenario_with",
    "spread",
    "valid",
    "worker_loops",
]


def default_scenario() -> dict[str, Any]:
    """The default scenario (scenarios/local.yaml) as data."""
    data: dict[str, Any] = yaml.safe_load((SCENARIO_DIR / "local.yaml").read_text())
    return data


def scenario_with(
    envoy_cpus: float | Sequence[float], *, tiny_rounds: int | None = None, tiny_steps: int | None = None, **load: Any
) -> dict[str, Any]:
    """The default local scenario at these Envoy CPU limits, with some `load` fields replaced. In a tiny run the
    rounds are `load`'s own, else `tiny_rounds` (a bench that needs no more than one says so), else TINY_ROUNDS;
    the windows per pass are `tiny_steps` when a bench needs more than TINY_LOAD's to reach a knee in one pass."""
    data = default_scenario()
    data["envoy"]["cpu"] = [envoy_cpus] if isinstance(envoy_cpus, float | int) else list(envoy_cpus)
    rounds = load.get("rounds", tiny_rounds if tiny_rounds is not None else TINY_ROUNDS)
    steps = tiny_steps if tiny_steps is not None else TINY_LOAD["max_steps"]
    tiny = {**TINY_LOAD, "rounds": rounds, "max_steps": steps} if TINY else {}
    data["load"] = {**data.get("load", {}), **load, **tiny}
    data["baseline"] = {"enabled": False}
    return data


KEEP = os.environ.get("GATEWAY_SIZER_BENCH_KEEP")  # a folder: keep every run's directory there
# Tiny sweeps (2 s windows, 3 of them, 2 rounds unless the bench asks for its own count): for the test that runs
# every bench so none rots unnoticed.
TINY = os.environ.get("GATEWAY_SIZER_BENCH_TINY") == "1"
TINY_LOAD = {"step_seconds": 2, "warmup_seconds": 1, "settle_seconds": 1, "max_steps": 3}
TINY_ROUNDS = 2
# the Go generator's (bench/openloop) load before its measured window, where a bench runs it between the sweep's rounds
GENERATOR_WARMUP_S = 1 if TINY else 3


def sweep_command(scenario: Path, results: Path) -> list[str]:
    """`gateway-sizer sweep` of a scenario file on free ports, writing into `results`."""
    return [
        sys.executable,
        "-m",
        "runner",
        "sweep",
        "--scenario",
        str(scenario),
        "--free-ports",
        "--results",
        str(results),
    ]


def run_sweep(scenario: dict[str, Any], *args: str, timeout_s: float = 1800) -> tuple[RunSummary, float]:
    """Run `gateway-sizer sweep` on a scenario; returns its summary and the wall time in seconds. With
    $GATEWAY_SIZER_BENCH_KEEP set to a folder, the run directories are kept there for a closer look."""
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-bench-") as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        start = time.monotonic()
        result = subprocess.run(
            [*sweep_command(path, Path(folder)), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
        wall = time.monotonic() - start
        run_dir = Path(folder) / "latest"
        if not (run_dir / "summary.json").exists():
            raise RuntimeError(f"sweep failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        if KEEP:
            shutil.copytree(
                run_dir.resolve(), Path(KEEP) / run_dir.resolve().name, ignore=shutil.ignore_patterns("testbed")
            )
        return load_summary(run_dir), wall


def valid(config: ConfigResult) -> str:
    """ "1,190 [1,150-1,230]" for a valid knee with its interval; the status otherwise."""
    knee = config.valid_knee
    if knee is None:
        return f"{config.status} ({config.reason})"
    interval = f" [{knee.low:,.0f}-{knee.high:,.0f}]" if knee.low is not None and knee.high is not None else ""
    return f"{knee.rps:,.0f}{interval}"


def spread(values: Sequence[float]) -> float:
    """(max - min) / median."""
    return (max(values) - min(values)) / statistics.median(values) if values else float("nan")


def all_overlap(knees: Sequence[Knee]) -> bool:
    """Whether every knee has an interval and all the intervals share a point."""
    bounds = [(k.low, k.high) for k in knees if k.low is not None and k.high is not None]
    return len(bounds) == len(knees) > 0 and max(low for low, _ in bounds) <= min(high for _, high in bounds)


@dataclass(frozen=True)
class WorkerLoop:
    """How the Locust workers a run starts wait for their next send: the gevent loop backend (GEVENT_BACKEND, e.g.
    `epoll`) and the send timer (GATEWAY_SIZER_TIMER: `fine`, a timerfd, or `gevent`, gevent.sleep). None leaves
    that one as the runner has it."""

    backend: str | None = None
    timer: str | None = None

    @property
    def label(self) -> str:
        parts = [
            f"loop {self.backend.split(',')[0]}" if self.backend else "",
            f"timer {self.timer}" if self.timer else "",
        ]
        return " ".join(p for p in parts if p)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """The workers started meanwhile inherit it; the old values are put back after."""
        changes = {LOOP_ENV: self.backend, TIMER_ENV: self.timer}
        before = {name: os.environ.get(name) for name in changes}
        os.environ.update({name: value for name, value in changes.items() if value is not None})
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def add_worker_loop_options(parser: argparse.ArgumentParser) -> None:
    """`--backends A/B` (gevent loop backends, each as GEVENT_BACKEND takes it) and `--timers fine/gevent` (the
    workers' send timer); worker_loops() makes every pair of them."""
    parser.add_argument(
        "--backends",
        type=lambda text: list(text.split("/")) if text else [None],
        default=[None],
        help="gevent loop backends of the Locust workers, '/'-separated, each as GEVENT_BACKEND takes it "
        "(epoll/linux_iouring,epoll)",
    )
    parser.add_argument(
        "--timers",
        type=lambda text: list(text.split("/")) if text else [None],
        default=[None],
        help="the Locust workers' send timers, '/'-separated: fine (a timerfd) and/or gevent (gevent.sleep)",
    )


def worker_loops(args: argparse.Namespace) -> list[WorkerLoop]:
    """Every (backend, timer) pair the options name; [WorkerLoop()] when they name none."""
    return [WorkerLoop(backend, timer) for backend in args.backends for timer in args.timers]

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
from pathlib import Path
from typing import Any

import yaml

from runner.model import ConfigResult, Knee, RunSummary
from runner.paths import PROJECT_ROOT, SCENARIO_DIR
from runner.platforms.local.testbed import LocalTestbed, Ports
from runner.results import load_summary

REPO = PROJECT_ROOT
__all__ = [
    "REPO",
    "TINY",
    "LocalTestbed",
    "Ports",
    "add_backends_option",
    "all_overlap",
    "default_scenario",
    "gevent_backend",
    "run_sweep",
    "scenario_with",
    "spread",
    "valid",
]


def default_scenario() -> dict[str, Any]:
    """The default scenario (scenarios/local.yaml) as data."""
    data: dict[str, Any] = yaml.safe_load((SCENARIO_DIR / "local.yaml").read_text())
    return data


def scenario_with(envoy_cpus: float | Sequence[float], **load: Any) -> dict[str, Any]:
    """The default local scenario at these Envoy CPU limits, with some `load` fields replaced."""
    data = default_scenario()
    data["envoy"]["cpu"] = [envoy_cpus] if isinstance(envoy_cpus, float | int) else list(envoy_cpus)
    tiny = {**TINY_LOAD, "rounds": load.get("rounds", TINY_ROUNDS)} if TINY else {}
    data["load"] = {**data.get("load", {}), **load, **tiny}
    data["baseline"] = {"enabled": False}
    return data


KEEP = os.environ.get("GATEWAY_SIZER_BENCH_KEEP")  # a folder: keep every run's directory there
# Tiny sweeps (2 s windows, 3 of them, 2 rounds unless the bench asks for its own count): for the test that runs
# every bench so none rots unnoticed.
TINY = os.environ.get("GATEWAY_SIZER_BENCH_TINY") == "1"
TINY_LOAD = {"step_seconds": 2, "warmup_seconds": 1, "settle_seconds": 1, "max_steps": 3}
TINY_ROUNDS = 2


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


@contextlib.contextmanager
def gevent_backend(backend: str | None) -> Iterator[None]:
    """GEVENT_BACKEND (the gevent loop backend, e.g. `epoll`) for the Locust workers a run starts meanwhile: they
    inherit the environment. None leaves it as it is; the old value is put back after."""
    before = os.environ.get("GEVENT_BACKEND")
    if backend is not None:
        os.environ["GEVENT_BACKEND"] = backend
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GEVENT_BACKEND", None)
        else:
            os.environ["GEVENT_BACKEND"] = before


def add_backends_option(parser: argparse.ArgumentParser) -> None:
    """`--backends A/B`: gevent loop backends for the Locust workers, each as GEVENT_BACKEND takes it; parsed into
    a list (`[None]` when not given: the runner's own)."""
    parser.add_argument(
        "--backends",
        type=lambda text: list(text.split("/")) if text else [None],
        default=[None],
        help="gevent loop backends of the Locust workers, '/'-separated, each as GEVENT_BACKEND takes it "
        "(epoll/linux_iouring,epoll)",
    )

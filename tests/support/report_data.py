"""The real runs the report tests read (Envoy 150m and 300m on the local platform, and the others in
tests/report/data), and variations of them."""

from __future__ import annotations

import shutil
from pathlib import Path

from runner.model import RunSummary, Step
from runner.paths import PROJECT_ROOT
from runner.results import load_summary

DATA = PROJECT_ROOT / "tests" / "report" / "data"
FIXTURE_RUN = DATA / "local-150m-300m"
THREE_LIMITS_RUN = DATA / "local-100m-200m-300m"  # a later sweep
LOCAL_ROUNDS_RUN = DATA / "local-rounds"  # 250m and 500m in 5 interleaved rounds, Poisson arrivals
KNEE_150M = 524.2586170370615
KNEE_300M = 1804.337717974861


def fixture_summary() -> RunSummary:
    """A fresh copy of the fixture's summary, safe to change."""
    return load_summary(FIXTURE_RUN)


def copy_run(tmp_path: Path, summary: RunSummary | None = None, name: str = "run") -> Path:
    """The fixture run directory copied under tmp_path, with `summary` written in place of its own."""
    run_dir = tmp_path / name
    shutil.copytree(FIXTURE_RUN, run_dir)
    if summary is not None:
        (run_dir / "summary.json").write_text(summary.model_dump_json(indent=2))
    return run_dir


def change_step(summary: RunSummary, config: int, step: int, **fields: object) -> Step:
    """Replace figures of one step of `summary` in place; returns the new step."""
    steps = summary.configs[config].steps
    steps[step] = steps[step].model_copy(update=fields)
    return steps[step]

"""The real run the report tests read (Envoy 150m and 300m on the local platform), and variations of it."""

from __future__ import annotations

import shutil
from pathlib import Path

from runner.results import RunSummary, load_summary

FIXTURE_RUN = Path(__file__).resolve().parent / "data" / "local-150m-300m"
THREE_LIMITS_RUN = Path(__file__).resolve().parent / "data" / "local-100m-200m-300m"  # a later sweep
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

"""The real runs the report tests read (Envoy 150m and 300m on the local platform, and the others in
tests/report/data), and variations of them."""

from __future__ import annotations

import shutil
from pathlib import Path

from runner.guards import SCRAPE_INTERVAL_S, GuardContext, check_step
from runner.model import RunSummary, Step
from runner.paths import PROJECT_ROOT
from runner.results import load_summary

DATA = PROJECT_ROOT / "tests" / "report" / "data"
FIXTURE_RUN = DATA / "local-150m-300m"
THREE_LIMITS_RUN = DATA / "local-100m-200m-300m"  # a later sweep
LOCAL_ROUNDS_RUN = DATA / "local-rounds"  # 250m and 500m in 5 interleaved rounds, Poisson arrivals
GATEWAY_API_RUN = DATA / "gateway-api"  # Gateway API mode on the one-machine cluster, scraped every 2 s (2026-11-27)
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


def change_step_judged(
    summary: RunSummary, config: int, step: int, *, scrape_interval_s: float | None = None, **fields: object
) -> Step:
    """change_step, and the step's guard findings as the run would have recorded them with the new figures: every
    guard judged again, at `scrape_interval_s` (default: the one the run recorded, else the scenarios' default)."""
    result = summary.configs[config]
    changed = change_step(summary, config, step, **fields)
    interval = scrape_interval_s or result.scrape_interval_s or SCRAPE_INTERVAL_S
    context = GuardContext(threshold=summary.threshold, workers=1, profile=result.profile, scrape_interval_s=interval)
    before = [s for s in result.steps if s.index < changed.index]
    findings = tuple(check_step(changed, before, context))
    return change_step(summary, config, step, guards=findings)

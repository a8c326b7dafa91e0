"""The report: a run's summary -> the report model -> Markdown, HTML and PNG plots; sizing and comparison.

Everything here returns data or text; only the CLI writes files and prints.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from runner.model import RunSummary
from runner.scenario import Scenario

__all__ = ["PLOT_DIR", "read_run", "read_scenario", "render_files"]

PLOT_DIR = "plots"


def render_files(summary: RunSummary, scenario: Scenario | None = None) -> dict[str, bytes]:
    """Every file of a run's report, by path relative to the run directory: report.md, report.html, plots/*.png."""
    from runner.report.html import render_html
    from runner.report.markdown import render_markdown
    from runner.report.model import build_report
    from runner.report.plots import render_plots

    report = build_report(summary, scenario)
    plots = render_plots(report)
    files = {f"{PLOT_DIR}/{plot.name}.png": plot.png for plot in plots}
    files["report.md"] = render_markdown(report, plots, PLOT_DIR).encode()
    files["report.html"] = render_html(report, plots).encode()
    return files


def read_scenario(run_dir: Path) -> Scenario | None:
    """The run's resolved scenario.yaml, or None when the run has none or it no longer validates."""
    try:
        loaded = yaml.safe_load((run_dir / "scenario.yaml").read_text())
        return Scenario.model_validate(loaded) if isinstance(loaded, dict) else None
    except (OSError, yaml.YAMLError, ValidationError):
        return None


def read_run(run_dir: Path) -> RunSummary:
    """A run's summary as the report reads it: what results saved by earlier versions did not record taken from
    the run's scenario.yaml (runner.report.recorded)."""
    from runner.report.recorded import with_fallbacks
    from runner.results import load_summary

    return with_fallbacks(load_summary(run_dir), read_scenario(run_dir))

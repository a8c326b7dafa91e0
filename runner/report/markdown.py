"""report.md: the reference report's layout in Markdown, from the report model. Returns text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.report._jinja import environment
from runner.report.model import Report

if TYPE_CHECKING:
    from runner.report.drawing import Plot

__all__ = ["render_markdown"]

TEMPLATE = "report.md.j2"


def render_markdown(report: Report, plots: Sequence[Plot], plot_dir: str = "plots") -> str:
    """The Markdown report; plots are referenced as `<plot_dir>/<name>.png`, which the caller writes."""
    template = environment(autoescape=False).get_template(TEMPLATE)
    return template.render(r=report, plots=plots, plot_dir=plot_dir, plot_names={p.name: p.title for p in plots})

"""report.html: one self-contained page (inline CSS, plots as data URIs), from the report model. Returns text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.report._jinja import environment
from runner.report.model import Report

if TYPE_CHECKING:
    from runner.report.drawing import Plot

__all__ = ["render_html"]

TEMPLATE = "report.html.j2"


def render_html(report: Report, plots: Sequence[Plot]) -> str:
    """The HTML report; it loads nothing from anywhere else."""
    template = environment(autoescape=True).get_template(TEMPLATE)
    return template.render(r=report, plots=plots, plot_names={p.name: p.title for p in plots})

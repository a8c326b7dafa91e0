"""The report's headings and explanatory prose live once (runner/report/templates/_prose.j2), for Markdown and
HTML alike: the templates lay them out, each in its own markup, and write no sentence of their own."""

from __future__ import annotations

import html
import re

import pytest

from runner.paths import PROJECT_ROOT
from runner.report import read_scenario
from runner.report.drawing import Plot
from runner.report.html import render_html
from runner.report.markdown import render_markdown
from runner.report.model import build_report
from runner.results import load_summary
from support.report_data import DATA

TEMPLATES = PROJECT_ROOT / "runner" / "report" / "templates"
LAYOUTS = ("report.md.j2", "report.html.j2", "memory.md.j2", "memory.html.j2")
MAX_WORDS = 5  # the HTML headline box's labels ("RPS per core at the", "No figure to size from."): layout, no prose
RUNS = sorted(path.name for path in DATA.iterdir() if (path / "summary.json").exists())


def _words_outside_jinja_and_markup(template: str) -> list[str]:
    """Runs of words a template writes itself: its text with every Jinja tag, expression, comment, HTML tag and
    the style sheet taken out."""
    text = re.sub(r"<style>.*?</style>", "|", template, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}|<[^>]*>", "|", text, flags=re.S)
    return [segment.strip() for segment in re.split(r"[|\n]", text) if segment.strip()]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_layout_template_writes_no_sentence_of_its_own(layout):
    runs = _words_outside_jinja_and_markup((TEMPLATES / layout).read_text())
    long = [run for run in runs if len(re.findall(r"[A-Za-z][\w'.,()-]*", run)) > MAX_WORDS]
    assert not long, f"prose in {layout}: put it in _prose.j2 so both formats share it: {long}"


def test_the_check_finds_prose_written_into_one_format():
    sentence = "<p>Knees are for the arrival model of each row.</p>\n{{ tables.table(t) }}"
    assert _words_outside_jinja_and_markup(sentence) == ["Knees are for the arrival model of each row."]


def _headings(markdown: str, page: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    md = [(len(m[1]), m[2].strip()) for m in re.finditer(r"^(#{1,3}) (.+)$", markdown, flags=re.M)]
    htm = [
        (int(m[1]), html.unescape(re.sub(r"<[^>]*>", "", m[2])).strip())
        for m in re.finditer(r"<h([1-3])[^>]*>(.*?)</h\1>", page, flags=re.S)
    ]
    return md, htm


@pytest.mark.parametrize("run", RUNS)
def test_both_formats_have_the_same_headings_at_the_same_levels(run):
    report = build_report(load_summary(DATA / run), read_scenario(DATA / run))
    plots = [Plot(name, name.replace("_", " "), "caption", b"") for name in ("cost_vs_rps", "memory_vs_routes")]
    md, htm = _headings(render_markdown(report, plots), render_html(report, plots))
    titles = {plot.title for plot in plots}  # a plot's title: a heading in Markdown, a figure's caption in HTML
    assert [h for h in md if h[1] not in titles] == htm
    assert (2, "Performance indicators") in md and (2, "Reproduction method") in md

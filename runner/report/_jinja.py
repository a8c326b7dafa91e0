"""The Jinja environment both text renderers share: templates from this package, a few number filters (the
tables' cells come formatted from runner.report.tables)."""

from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader, StrictUndefined

from runner.report import formatting as fmt


def _md_cell(value: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _slug(title: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _pretty(text: str) -> str:
    """Typographic forms for HTML of what the terminal writes in ASCII: a times sign, R squared, an arrow,
    plus-minus."""
    pairs = ((" x ", " \u00d7 "), ("R^2", "R\u00b2"), (" -> ", " \u2192 "), ("+-", "\u00b1"))
    for ascii_form, typographic in pairs:
        text = text.replace(ascii_form, typographic)
    return text


def environment(*, autoescape: bool) -> Environment:
    env = Environment(
        loader=PackageLoader("runner.report", "templates"),
        autoescape=autoescape,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        rps=fmt.rps,
        pct=fmt.percent,
        cpu=fmt.cpu,
        concurrency=fmt.concurrency,
        cell=_md_cell,
        slug=_slug,
        pretty=_pretty,
    )
    return env

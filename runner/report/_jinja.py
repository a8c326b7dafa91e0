"""The Jinja environment both text renderers share: templates from this package, number filters."""

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


def _microseconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} \u00b5s"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} s"


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
        ms=fmt.ms,
        cpu=fmt.cpu,
        millicores=fmt.millicores,
        mib=fmt.mebibytes,
        signed_pct=fmt.signed_percent,
        cell=_md_cell,
        slug=_slug,
        pretty=_pretty,
        us=_microseconds,
        seconds=_seconds,
    )
    return env

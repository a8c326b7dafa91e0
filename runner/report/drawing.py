"""How every plot of the report is drawn: one figure of the report's size and style on matplotlib's Agg canvas
(no display, no pyplot state), returned as PNG bytes, and the `Plot` that carries it to the renderers."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["COLORS", "MIB", "PERCENTILE_STYLES", "Plot", "color", "png"]

SIZE_IN = (6.4, 3.8)
DPI = 120
FONT_PT = 10.5
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
GRID_COLOR, GRID_LINEWIDTH = "#dddddd", 0.6
MIB = 2**20
PERCENTILE_STYLES: dict[str, dict] = {
    "p50": {"linestyle": "--", "linewidth": 1.0, "alpha": 0.6},
    "p95": {"linestyle": "-", "linewidth": 1.6, "marker": "o"},
    "p99": {"linestyle": ":", "linewidth": 1.4},
}


@dataclass(frozen=True)
class Plot:
    """One figure: `name` is its file stem (plots/<name>.png) and its anchor in the HTML."""

    name: str
    title: str
    caption: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def png(draw: Callable[[Axes], None]) -> bytes:
    """The figure `draw` fills on fresh axes (gridded, no top or right spine), as PNG bytes."""
    with matplotlib.rc_context({"font.size": FONT_PT}):
        figure = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        axes.grid(True, color=GRID_COLOR, linewidth=GRID_LINEWIDTH)
        axes.spines[["top", "right"]].set_visible(False)
        draw(axes)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def color(index: int) -> str:
    return COLORS[index % len(COLORS)]

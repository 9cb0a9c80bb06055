"""PNG pictures of a trace: the shared layout drawn with matplotlib, an optional dependency imported only here."""

from __future__ import annotations

import importlib.util
import io

from meshcomm.explain.layout import COLORS, Curve, Item, Polygon, Rect, Text, sheet
from meshcomm.explain.model import Trace

__all__ = ["MISSING", "available", "render"]

MISSING = 'matplotlib is not installed; --format png needs it: pip install matplotlib (or pip install "meshcomm[viz]")'
_HALIGN = {"start": "left", "middle": "center", "end": "right"}
_PX = 1 / 100  # inches per layout pixel; at _DPI a layout pixel becomes 1.5 image pixels, so small text stays sharp
_DPI = 150
_POINTS_PER_PX = 72 * _PX  # matplotlib sizes fonts and lines in points, the layout in pixels


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _flatten(trace: Trace) -> list[Item]:
    """Every item of the sheet in page coordinates, in painting order, with a frame around each panel."""
    page = sheet(trace)
    items: list[Item] = list(page.header)
    for x, y, panel in page.placed:
        items.append(Rect(x + 4, y + 2, panel.width - 8, panel.height - 6, "none", COLORS["border"], 0.8))
        items.extend(item.shifted(x, y) for item in panel.items)
    return items


def render(trace: Trace) -> bytes:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PatchCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import PathPatch
        from matplotlib.patches import Polygon as PolygonPatch
        from matplotlib.patches import Rectangle
        from matplotlib.path import Path
    except ImportError:
        raise ImportError(MISSING) from None

    page = sheet(trace)
    # A bare Figure with its own Agg canvas: no pyplot, so no global state and no GUI backend is touched.
    figure = Figure(figsize=(page.width * _PX, page.height * _PX), dpi=_DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, page.width)
    axes.set_ylim(page.height, 0)  # the layout's y grows downwards
    axes.set_axis_off()

    # One collection per kind of shape, because thousands of single patches make big pictures slow. Layers keep
    # the SVG's painting order: boxes, then arrows, then the boxes behind arrow labels, then all text.
    boxes: list[Rect] = []
    label_boxes: list[Rect] = []
    curves: list[Curve] = []
    heads: list[Polygon] = []
    for item in _flatten(trace):
        if isinstance(item, Rect):
            (label_boxes if item.over_arrows else boxes).append(item)
        elif isinstance(item, Curve):
            curves.append(item)
        elif isinstance(item, Polygon):
            heads.append(item)
        elif isinstance(item, Text):
            axes.text(item.x, item.y, item.text, fontsize=item.size * _POINTS_PER_PX, color=item.color,
                      ha=_HALIGN[item.anchor], va="center_baseline", fontweight="bold" if item.bold else "normal",
                      zorder=5)
    for layer, rects in ((1, boxes), (4, label_boxes)):
        axes.add_collection(PatchCollection(
            [Rectangle((r.x, r.y), r.w, r.h) for r in rects],
            facecolors=[r.fill for r in rects], edgecolors=[r.stroke for r in rects],
            linewidths=[r.width * _POINTS_PER_PX for r in rects],
            linestyles=[(0, (3, 2)) if r.dashed else "solid" for r in rects], zorder=layer,
        ))
    axes.add_collection(PatchCollection(
        [PathPatch(Path([(c.x0, c.y0), (c.cx, c.cy), (c.x1, c.y1)], [Path.MOVETO, Path.CURVE3, Path.CURVE3]))
         for c in curves],
        facecolors="none", edgecolors=[c.color for c in curves],
        linewidths=[c.width * _POINTS_PER_PX for c in curves],
        linestyles=[(0, (4, 3)) if c.dashed else "solid" for c in curves], zorder=2,
    ))
    axes.add_collection(PatchCollection(
        [PolygonPatch(p.points, closed=True) for p in heads],
        facecolors=[p.fill for p in heads], edgecolors="none", zorder=3,
    ))
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=_DPI, facecolor="white")
    return out.getvalue()

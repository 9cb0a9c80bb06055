"""Hand-written SVG for a trace: one panel per step in a grid, from the shared layout."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr
from xml.sax.saxutils import escape

from meshcomm.explain.layout import COLORS, FONT, Curve, Item, Panel, Polygon, Rect, Text, sheet
from meshcomm.explain.model import Trace

__all__ = ["panel_svg", "render"]

_NS = 'xmlns="http://www.w3.org/2000/svg"'
_ANCHOR = {"start": "start", "middle": "middle", "end": "end"}


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _item(item: Item) -> str:
    if isinstance(item, Rect):
        dash = ' stroke-dasharray="3 2"' if item.dashed else ""
        return (f'<rect x="{_num(item.x)}" y="{_num(item.y)}" width="{_num(item.w)}" height="{_num(item.h)}" '
                f'rx="3" fill="{item.fill}" stroke="{item.stroke}" stroke-width="{_num(item.width)}"{dash}/>')
    if isinstance(item, Text):
        weight = ' font-weight="bold"' if item.bold else ""
        return (f'<text x="{_num(item.x)}" y="{_num(item.y)}" font-size="{_num(item.size)}" '
                f'text-anchor="{_ANCHOR[item.anchor]}" dominant-baseline="central" fill="{item.color}"{weight}>'
                f"{escape(item.text)}</text>")
    if isinstance(item, Curve):
        dash = ' stroke-dasharray="4 3"' if item.dashed else ""
        path = (f"M{_num(item.x0)},{_num(item.y0)} Q{_num(item.cx)},{_num(item.cy)} "
                f"{_num(item.x1)},{_num(item.y1)}")
        return (f'<path d="{path}" fill="none" stroke="{item.color}" stroke-width="{_num(item.width)}"{dash}/>')
    if isinstance(item, Polygon):
        points = " ".join(f"{_num(x)},{_num(y)}" for x, y in item.points)
        return f'<polygon points="{points}" fill="{item.fill}"/>'
    raise TypeError(f"cannot draw {type(item).__name__}")


def _open(width: float, height: float, namespace: bool, title: str) -> list[str]:
    ns = f" {_NS}" if namespace else ""
    return [
        f'<svg{ns} width="{_num(width)}" height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" '
        f"font-family={quoteattr(FONT)}>",
        f"<title>{escape(title)}</title>",
        f'<rect width="{_num(width)}" height="{_num(height)}" fill="#ffffff"/>',
    ]


def panel_svg(panel: Panel, title: str, namespace: bool = True) -> str:
    """One panel as its own <svg>; HTML pages inline it without the namespace attribute (HTML implies it)."""
    lines = _open(panel.width, panel.height, namespace, f"{title}: {panel.title}")
    lines.extend(_item(item) for item in panel.items)
    lines.append("</svg>")
    return "\n".join(lines)


def render(trace: Trace) -> str:
    page = sheet(trace)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', *_open(page.width, page.height, True, trace.title)]
    lines.extend(_item(item) for item in page.header)
    for x, y, panel in page.placed:
        lines.append(f'<g transform="translate({_num(x)},{_num(y)})">')
        lines.append(f'<rect x="4" y="2" width="{_num(panel.width - 8)}" height="{_num(panel.height - 6)}" '
                     f'rx="6" fill="none" stroke="{COLORS["border"]}" stroke-width="0.8"/>')
        lines.extend(_item(item) for item in panel.items)
        lines.append("</g>")
    lines.append("</svg>")
    return "\n".join(lines) + "\n"

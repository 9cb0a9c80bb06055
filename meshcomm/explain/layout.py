"""Geometry of the pictures: a trace laid out as boxes, curves and text, shared by the SVG and PNG renderers."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Union

from meshcomm.algorithms.schedule import Slice
from meshcomm.explain.model import Cell, State, Step, Trace, ranks_label

__all__ = ["Curve", "Panel", "Polygon", "Rect", "Sheet", "Text", "panels", "sheet"]

# Coordinates are pixels with y growing downwards (SVG's convention); png.py flips them.
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
CELL_H = 22
ROW_GAP = 3
GROUP_GAP = 14
MIN_COLUMN_GAP = 46
LEFT = 84
ARC = 26  # the most an arrow bows away from the straight line, kept free above and below the boxes
HEADS = 40  # the title and the rank names above the boxes
TOP = HEADS + ARC
PAD = 16
CHAR_W = 7.5  # generous width of an 11 px glyph, enough to size boxes without measuring text
LABEL_CHAR_W = CHAR_W * 0.85  # arrow labels are 9.5 px

COLORS = {
    "ink": "#212529",
    "muted": "#868e96",
    "unwritten": "#ffffff",
    "absent": "#f1f3f5",
    "final": "#2b8a3e",
    "changed": "#e8590c",
    "border": "#adb5bd",
    "reduce": "#c92a2a",
    "store": "#1864ab",
    "local": "#5f3dc4",
    "label_bg": "#ffffff",
}
# One pastel per rank for data that comes from a single rank (inputs, gathered blocks).
RANK_FILLS = ("#ffd8a8", "#c3fae8", "#d0bfff", "#ffc9c9", "#a5d8ff", "#d8f5a2", "#fcc2d7", "#ffec99",
              "#99e9f2", "#e9ecef")
# Partial reductions darken from light to deep blue as they gather contributions.
_LIGHT = (0xdb, 0xe4, 0xff)
_DEEP = (0x36, 0x4f, 0xc7)


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str
    width: float = 1.0
    dashed: bool = False
    over_arrows: bool = False  # the box behind an arrow's label, painted above the arrows

    def shifted(self, dx: float, dy: float) -> "Rect":
        return dataclasses.replace(self, x=self.x + dx, y=self.y + dy)


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # vertical centre of the text
    text: str
    size: float = 11.0
    anchor: str = "middle"  # start | middle | end
    color: str = COLORS["ink"]
    bold: bool = False

    def shifted(self, dx: float, dy: float) -> "Text":
        return dataclasses.replace(self, x=self.x + dx, y=self.y + dy)


@dataclass(frozen=True)
class Curve:
    """A quadratic Bezier from (x0, y0) to (x1, y1) bent towards (cx, cy)."""

    x0: float
    y0: float
    cx: float
    cy: float
    x1: float
    y1: float
    color: str
    width: float = 1.6
    dashed: bool = False

    def shifted(self, dx: float, dy: float) -> "Curve":
        return dataclasses.replace(
            self, x0=self.x0 + dx, y0=self.y0 + dy, cx=self.cx + dx, cy=self.cy + dy, x1=self.x1 + dx, y1=self.y1 + dy
        )


@dataclass(frozen=True)
class Polygon:
    points: tuple[tuple[float, float], ...]
    fill: str

    def shifted(self, dx: float, dy: float) -> "Polygon":
        return Polygon(tuple((x + dx, y + dy) for x, y in self.points), self.fill)


Item = Union[Rect, Text, Curve, Polygon]


@dataclass
class Panel:
    """One moment of the algorithm: every rank's chunks and the arrows of one step."""

    title: str
    width: float
    height: float
    items: list[Item] = field(default_factory=list)


@dataclass
class Sheet:
    """Everything on one page: a header and the panels in a grid."""

    width: float
    height: float
    header: list[Item]
    placed: list[tuple[float, float, Panel]]


def cell_fill(cell: Cell, nranks: int) -> tuple[str, str]:
    """Fill and text colour of a chunk: a rank's own colour, or a blue that deepens as contributions add up."""
    if not cell.ranks:
        return COLORS["unwritten"], COLORS["muted"]
    if len(cell.ranks) == 1:
        return RANK_FILLS[cell.ranks[0] % len(RANK_FILLS)], COLORS["ink"]
    share = len(cell.ranks) / nranks
    rgb = tuple(round(a + (b - a) * share) for a, b in zip(_LIGHT, _DEEP))
    return "#%02x%02x%02x" % rgb, "#ffffff" if share > 0.55 else COLORS["ink"]


class _Grid:
    """Where each rank's column and each chunk's row are, the same in every panel of a trace."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        longest = max([len(label) for label in _all_labels(trace)] + [len(f"rank {trace.nranks - 1}")])
        self.cell_w = max(46.0, CHAR_W * longest + 14)
        # Arrows between neighbours carry a label in the gap, so the gap fits the longest one.
        carried = max((len(m.carries) for step in trace.steps for m in step.messages), default=0)
        self.gap = max(MIN_COLUMN_GAP, LABEL_CHAR_W * carried + 26)
        self.rows: dict[str, list[float]] = {}
        y = TOP
        # A barrier has no buffers: one row of boxes shows whom each rank has heard from.
        groups = {buf: len(chunks) for buf, chunks in trace.chunks.items()} if trace.moves_data else {"heard": 1}
        self.group_tops: dict[str, float] = {}
        for buf, nrows in groups.items():
            self.group_tops[buf] = y
            self.rows[buf] = [y + i * (CELL_H + ROW_GAP) for i in range(nrows)]
            y += nrows * (CELL_H + ROW_GAP) + GROUP_GAP
        self.height = y + ARC + PAD
        # The last column needs half a gap for its local operations' arrows, which bulge to the right,
        # and a panel is never narrower than its title line.
        self.width = max(300.0, LEFT + trace.nranks * self.cell_w + (trace.nranks - 0.5) * self.gap + PAD)

    def x(self, rank: int) -> float:
        return LEFT + rank * (self.cell_w + self.gap)

    def span(self, piece: Slice) -> tuple[float, float]:
        """Top and bottom of the chunks a slice covers (a zero-element slice: its first chunk)."""
        if not self.trace.moves_data:
            top = self.rows["heard"][0]
            return top, top + CELL_H
        chunks = self.trace.chunks[piece.buf]
        rows = self.rows[piece.buf]
        inside = [i for i, c in enumerate(chunks) if c.start < piece.end and piece.offset < c.stop]
        if not inside:
            inside = [next((i for i, c in enumerate(chunks) if c.start >= piece.offset), len(chunks) - 1)]
        return rows[inside[0]], rows[inside[-1]] + CELL_H


def _all_labels(trace: Trace) -> list[str]:
    labels = [ranks_label(ranks) for ranks in trace.heard_at_start]
    for state in [trace.start] + [step.state for step in trace.steps]:
        for per_rank in state:
            for cells in per_rank.values():
                labels.extend(cell.label for cell in cells if cell is not None)
    for step in trace.steps:
        labels.extend(ranks_label(ranks) for ranks in step.heard)
    return labels


def panels(trace: Trace) -> list[Panel]:
    """The state before step 1, then one panel per step."""
    grid = _Grid(trace)
    result = [_panel(trace, grid, trace.start_title, trace.start, trace.heard_at_start, trace.heard_at_start, None)]
    heard_before = trace.heard_at_start
    for step in trace.steps:
        title = f"step {step.index + 1} of {len(trace.steps)}"
        result.append(_panel(trace, grid, title, step.state, step.heard, heard_before, step))
        heard_before = step.heard
    return result


def _panel(
    trace: Trace,
    grid: _Grid,
    title: str,
    state: State,
    heard: tuple[tuple[int, ...], ...],
    heard_before: tuple[tuple[int, ...], ...],
    step: Step | None,
) -> Panel:
    panel = Panel(title, grid.width, grid.height)
    items = panel.items
    items.append(Text(PAD, 16, title, size=13, anchor="start", bold=True))
    if step is not None:
        summary = f"{len(step.messages)} message{'s' if len(step.messages) != 1 else ''}"
        if step.local:
            summary += f", {len(step.local)} local"
        items.append(Text(PAD + CHAR_W * 1.25 * len(title) + 10, 16, summary, size=11, anchor="start",
                          color=COLORS["muted"]))
    for rank in range(trace.nranks):
        items.append(Text(grid.x(rank) + grid.cell_w / 2, HEADS - 6, f"rank {rank}", bold=True))
    if trace.moves_data:
        for buf, chunks in trace.chunks.items():
            top = grid.group_tops[buf]
            items.append(Text(LEFT - 10, top - 7, buf, size=10, anchor="end", color=COLORS["muted"], bold=True))
            for index, (chunk, y) in enumerate(zip(chunks, grid.rows[buf])):
                items.append(Text(LEFT - 10, y + CELL_H / 2, chunk.span, size=9, anchor="end",
                                  color=COLORS["muted"]))
                for rank in range(trace.nranks):
                    items.extend(_cell(grid, rank, y, state[rank][buf][index], marks=step is not None))
    else:
        y = grid.rows["heard"][0]
        items.append(Text(LEFT - 10, y + CELL_H / 2, "heard", size=10, anchor="end", color=COLORS["muted"],
                          bold=True))
        for rank in range(trace.nranks):
            ranks = heard[rank]
            cell = Cell(ranks_label(ranks), ranks, len(ranks) == trace.nranks, ranks != heard_before[rank])
            items.extend(_cell(grid, rank, y, cell, marks=step is not None))
    if step is not None:
        items.extend(_arrows(grid, step))
    return panel


def _cell(grid: _Grid, rank: int, y: float, cell: Cell | None, marks: bool) -> list[Item]:
    x = grid.x(rank)
    if cell is None:
        return []
    fill, ink = cell_fill(cell, grid.trace.nranks)
    if marks and cell.changed:
        stroke, width = COLORS["changed"], 2.6
    elif cell.final:
        stroke, width = COLORS["final"], 2.2
    else:
        stroke, width = COLORS["border"], 1.0
    return [
        Rect(x, y, grid.cell_w, CELL_H, fill, stroke, width, dashed=not cell.ranks),
        Text(x + grid.cell_w / 2, y + CELL_H / 2, cell.label, color=ink),
    ]


def _arrows(grid: _Grid, step: Step) -> list[Item]:
    items: list[Item] = []
    labels: list[Item] = []
    for op in step.local:
        top0, bottom0 = grid.span(op.op.src)
        top1, bottom1 = grid.span(op.op.dst)
        x = grid.x(op.rank) + grid.cell_w
        y0, y1 = (top0 + bottom0) / 2, (top1 + bottom1) / 2
        bulge = min(grid.gap * 0.4, 10 + abs(y1 - y0) * 0.15)
        curve = Curve(x, y0, x + bulge * 2, (y0 + y1) / 2, x + 2, y1, COLORS["local"], 1.3, dashed=True)
        items.extend(_with_head(curve))
    for m in step.messages:
        top0, bottom0 = grid.span(m.src)
        top1, bottom1 = grid.span(m.dst)
        rightwards = m.receiver > m.sender
        x0 = grid.x(m.sender) + (grid.cell_w if rightwards else 0)
        x1 = grid.x(m.receiver) + (0 if rightwards else grid.cell_w)
        y0, y1 = (top0 + bottom0) / 2, (top1 + bottom1) / 2
        # Bend rightward arrows up and leftward ones down so a pair exchanging data shows two arrows.
        dx, dy = x1 - x0, y1 - y0
        bend = 0.18 if abs(m.receiver - m.sender) > 1 else 0.12
        # A quadratic curve peaks halfway to its control point, so capping the offset at 2 ARC keeps it in ARC.
        lift = min(bend * abs(dx), 2 * ARC)
        cx, cy = (x0 + x1) / 2 + bend * dy, (y0 + y1) / 2 - lift * (1 if rightwards else -1)
        color = COLORS["reduce"] if m.reduce else COLORS["store"]
        curve = Curve(x0, y0, cx, cy, x1, y1, color)
        items.extend(_with_head(curve))
        # The label sits in the gap beside the sender, not at the middle, where a long arrow crosses other boxes.
        mx, my = _point_at_x(curve, x0 + (grid.gap / 2 if rightwards else -grid.gap / 2))
        width = LABEL_CHAR_W * len(m.carries) + 6
        labels.append(Rect(mx - width / 2, my - 7, width, 14, COLORS["label_bg"], color, 0.8, over_arrows=True))
        labels.append(Text(mx, my, m.carries, size=9.5, color=color))
    return items + labels  # labels last so no arrow crosses them


def _point_at_x(curve: Curve, x: float) -> tuple[float, float]:
    """The point of the curve whose x is nearest `x` (sampled: exact enough for placing a label)."""
    best = (math.inf, curve.x0, curve.y0)
    for i in range(41):
        t = i / 40
        px = (1 - t) ** 2 * curve.x0 + 2 * (1 - t) * t * curve.cx + t * t * curve.x1
        py = (1 - t) ** 2 * curve.y0 + 2 * (1 - t) * t * curve.cy + t * t * curve.y1
        best = min(best, (abs(px - x), px, py))
    return best[1], best[2]


def _with_head(curve: Curve) -> list[Item]:
    """The curve, stopped short of its end, and a filled arrowhead along its final tangent."""
    tx, ty = curve.x1 - curve.cx, curve.y1 - curve.cy
    length = math.hypot(tx, ty) or 1.0
    ux, uy = tx / length, ty / length
    size = 8.0
    base_x, base_y = curve.x1 - ux * size, curve.y1 - uy * size
    shortened = Curve(curve.x0, curve.y0, curve.cx, curve.cy, base_x, base_y, curve.color, curve.width, curve.dashed)
    head = Polygon(
        ((curve.x1, curve.y1), (base_x - uy * size * 0.45, base_y + ux * size * 0.45),
         (base_x + uy * size * 0.45, base_y - ux * size * 0.45)),
        curve.color,
    )
    return [shortened, head]


def cost_line(trace: Trace) -> str:
    c = trace.cost
    text = f"{c.steps} step{'s' if c.steps != 1 else ''}, {c.messages} message{'s' if c.messages != 1 else ''}"
    if not trace.moves_data:
        return text + ", no data"
    return (f"{text}, {c.bytes_sent} bytes on the wire, {c.bytes_reduced} bytes reduced ({trace.dtype}); busiest "
            f"rank sends {c.max_rank_sent}, receives {c.max_rank_received}, reduces {c.max_rank_reduced} elements")


def _header(trace: Trace) -> tuple[list[Item], float]:
    lines = [
        (trace.title, 16.0, True, COLORS["ink"]),
        (trace.legend[0].upper() + trace.legend[1:], 11.0, False, COLORS["muted"]),
        ("orange border: changed by this step   green border: holds the final result   red arrow: received and "
         "reduced   blue arrow: received and stored   dashed: local copy or reduce", 11.0, False, COLORS["muted"]),
        (f"cost: {cost_line(trace)}", 11.0, False, COLORS["ink"]),
    ]
    items: list[Item] = []
    y = PAD + 8
    for text, size, bold, color in lines:
        items.append(Text(PAD, y, text, size=size, anchor="start", color=color, bold=bold))
        y += size + 9
    return items, y + 4


def sheet(trace: Trace, columns: int | None = None) -> Sheet:
    """All panels in a grid under a header; `columns` defaults to a roughly 3:2 page."""
    laid = panels(trace)
    pw, ph = laid[0].width, laid[0].height
    if columns is None:
        columns = max(1, min(len(laid), round(math.sqrt(len(laid) * ph * 1.5 / pw))))
    header, top = _header(trace)
    header_width = CHAR_W * max(len(t.text) for t in header if isinstance(t, Text)) + 2 * PAD
    placed = []
    for index, panel in enumerate(laid):
        row, col = divmod(index, columns)
        placed.append((col * pw, top + row * ph, panel))
    rows = math.ceil(len(laid) / columns)
    return Sheet(max(columns * pw, header_width), top + rows * ph, header, placed)

"""The terminal rendering of a trace: per step, an aligned table of operations and one of every rank's chunks."""

from __future__ import annotations

from meshcomm.algorithms.schedule import INPUT, Slice
from meshcomm.explain.model import Cell, LocalOp, Message, State, Step, Trace, ranks_label

__all__ = ["operation_lines", "render"]

_RESET = "\x1b[0m"
_STYLE = {
    "title": "\x1b[1m",
    "changed": "\x1b[1;33m",
    "final": "\x1b[32m",
    "unwritten": "\x1b[2m",
    "reduce": "\x1b[35m",
}
_GAP = "  "
_BUFFER_GAP = "    "


class _Painter:
    """ANSI styles only when asked, so redirected output and NO_COLOR users get plain text."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"{_STYLE[style]}{text}{_RESET}" if self.color and style in _STYLE else text


def render(trace: Trace, color: bool = False) -> str:
    paint = _Painter(color)
    lines = [paint(trace.title, "title"), *_legend(trace), ""]
    widths = _widths(trace)
    lines.append(paint(trace.start_title, "title"))
    lines.extend(_state_table(trace, trace.start, trace.heard_at_start, widths, paint, with_input=True))
    for step in trace.steps:
        lines.append("")
        header = f"step {step.index + 1} of {len(trace.steps)}"
        counts = f"{len(step.messages)} message{'s' if len(step.messages) != 1 else ''}"
        if step.local:
            counts += f", {len(step.local)} local operation{'s' if len(step.local) != 1 else ''}"
        lines.append(paint(header, "title") + f": {counts}")
        lines.extend(_operations(step.local, step.messages, paint))
        lines.append(f"  after step {step.index + 1}:")
        lines.extend(_state_table(trace, step.state, step.heard, widths, paint, with_input=False))
    lines.append("")
    lines.extend(_cost(trace))
    return "\n".join(lines) + "\n"


def _legend(trace: Trace) -> list[str]:
    """The shared legend, wrapped at its first colon so it fits a terminal."""
    head, sep, rest = trace.legend.partition(": ")
    lines = [head[0].upper() + head[1:] + sep.rstrip()] if sep else []
    rest = rest if sep else trace.legend
    if trace.moves_data:
        rest += "; * = changed by this step"
    lines.append(rest[0].upper() + rest[1:] + ".")
    return lines


def _buffers(trace: Trace, with_input: bool) -> list[str]:
    # Input never changes (explain does not alias it with output), so it is shown once, before step 1.
    return [buf for buf in trace.chunks if with_input or buf != INPUT]


def _cell_text(cell: Cell | None, mark_changes: bool) -> str:
    if cell is None:
        return ""
    return cell.label + ("*" if mark_changes and cell.changed else "")


def _widths(trace: Trace) -> dict[str, list[int]]:
    """One width per chunk column over the whole trace, so columns do not jump between steps."""
    widths = {buf: [len(chunk.span) for chunk in chunks] for buf, chunks in trace.chunks.items()}
    states = [(trace.start, False)] + [(step.state, True) for step in trace.steps]
    for state, marks in states:
        for per_rank in state:
            for buf, cells in per_rank.items():
                for index, cell in enumerate(cells):
                    widths[buf][index] = max(widths[buf][index], len(_cell_text(cell, marks)))
    return widths


def _state_table(
    trace: Trace,
    state: State,
    heard: tuple[tuple[int, ...], ...],
    widths: dict[str, list[int]],
    paint: _Painter,
    with_input: bool,
) -> list[str]:
    name_width = len(f"rank {trace.nranks - 1}")
    indent = "    "
    if not trace.moves_data:
        return [
            f"{indent}{f'rank {r}':<{name_width}}{_GAP}heard from {ranks_label(heard[r])}" for r in range(trace.nranks)
        ]
    buffers = _buffers(trace, with_input)
    group_widths = {buf: sum(widths[buf]) + len(_GAP) * (len(widths[buf]) - 1) for buf in buffers}
    names = _BUFFER_GAP.join(f"{buf:<{group_widths[buf]}}" for buf in buffers)
    spans = _BUFFER_GAP.join(
        _GAP.join(f"{chunk.span:<{w}}" for chunk, w in zip(trace.chunks[buf], widths[buf])) for buf in buffers
    )
    lines = [f"{indent}{'':<{name_width}}{_GAP}{names}".rstrip(), f"{indent}{'':<{name_width}}{_GAP}{spans}".rstrip()]
    marks = not with_input
    for rank, per_rank in enumerate(state):
        groups = []
        for group, buf in enumerate(buffers):
            cells = []
            for index, (cell, w) in enumerate(zip(per_rank[buf], widths[buf])):
                text = _cell_text(cell, marks)
                last = group == len(buffers) - 1 and index == len(widths[buf]) - 1
                # Pad outside the colour codes, and not at the end, so coloured and plain rows match.
                padding = "" if last else " " * (w - len(text))
                cells.append(paint(text, _cell_style(cell, marks)) + padding if text else padding)
            groups.append(_GAP.join(cells))
        lines.append(f"{indent}{f'rank {rank}':<{name_width}}{_GAP}{_BUFFER_GAP.join(groups)}".rstrip())
    return lines


def _cell_style(cell: Cell | None, marks: bool) -> str:
    if cell is None:
        return ""
    if marks and cell.changed:
        return "changed"
    if cell.final:
        return "final"
    if not cell.ranks:
        return "unwritten"
    return ""


def _slice(piece: Slice) -> str:
    return f"{piece.buf}[{piece.offset}:{piece.end}]"


def operation_lines(step: Step) -> list[str]:
    """Step's operations as an aligned plain-text table (the HTML page shows it under each picture)."""
    return [line[2:] for line in _operations(step.local, step.messages, _Painter(False))]


def _operations(local: tuple[LocalOp, ...], messages: tuple[Message, ...], paint: _Painter) -> list[str]:
    rows: list[tuple[str, str, str, str, str, bool]] = [("from", "to", "data", "holding", "effect", False)]
    for op in local:
        verb = "reduced into" if op.reduce else "copied to"
        effect = f"{verb} {_slice(op.op.dst)}"
        rows.append((f"rank {op.rank}", "itself", _slice(op.op.src), op.carries, effect, op.reduce))
    for m in messages:
        if m.src.count == 0:
            data, effect = "(empty)", "learns who has arrived"
        else:
            data = _slice(m.src)
            effect = f"{'reduced into' if m.reduce else 'stored in'} {_slice(m.dst)}"
        rows.append((f"rank {m.sender}", f"rank {m.receiver}", data, m.carries, effect, m.reduce))
    if len(rows) == 1:
        return ["    (nothing to do)"]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for index, (sender, receiver, data, carries, effect, reduce) in enumerate(rows):
        arrow = "  " if index == 0 else "->"
        text = (
            f"    {sender:<{widths[0]}} {arrow} {receiver:<{widths[1]}}{_GAP}{data:<{widths[2]}}{_GAP}"
            f"{carries:<{widths[3]}}{_GAP}"
        )
        lines.append(text + (paint(effect, "reduce") if reduce else effect))
    return lines


def _cost(trace: Trace) -> list[str]:
    c = trace.cost
    counts = f"{c.steps} step{'s' if c.steps != 1 else ''}, {c.messages} message{'s' if c.messages != 1 else ''}"
    if not trace.moves_data:
        return [f"cost: {counts}, no data"]
    return [
        f"cost: {counts}, {c.elements_sent} elements = {c.bytes_sent} bytes on the wire, "
        f"{c.elements_reduced} elements = {c.bytes_reduced} bytes reduced ({trace.dtype})",
        f"      busiest rank sends {c.max_rank_sent}, receives {c.max_rank_received} "
        f"and reduces {c.max_rank_reduced} elements",
    ]

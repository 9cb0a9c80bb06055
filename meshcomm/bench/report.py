"""How results are shown: nccl-tests' table rows, JSON lines, the side-by-side comparison, a plot, a progress bar.

A result is one JSON-able dict per (library, collective, size): lib, coll,
ranks, bytes, count, dtype, op, root, algo, iters, time_us, algbw_GBps,
busbw_GBps, wrong (None when not checked) and version (the library's own
description, e.g. "mpi4py 4.1.2, MPICH Version: 4.0.2").
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import TextIO

from meshcomm.bench.sizes import human_bytes

Record = dict

VIZ_HINT = 'matplotlib is not installed; --plot needs it: pip install "meshcomm[viz]"'

_COLUMNS = (f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time':>9} {'algbw':>7} "
            f"{'busbw':>7} {'#wrong':>7}")
_UNITS = f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>7}"


def format_time(us: float) -> str:
    """nccl-tests' precision: 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10000:
        return f"{us:.0f}"
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def header_lines() -> list[str]:
    return [_COLUMNS.rstrip(), _UNITS.rstrip()]


def row(rec: Record) -> str:
    wrong = "N/A" if rec["wrong"] is None else str(rec["wrong"])
    return (f"{rec['bytes']:>12} {rec['count']:>12} {rec['dtype']:>8} {rec['op']:>6} {rec['root']:>5} "
            f"{format_time(rec['time_us']):>9} {rec['algbw_GBps']:>7.2f} {rec['busbw_GBps']:>7.2f} {wrong:>7}")


def is_row(line: str) -> bool:
    """Table rows are the only lines of a worker's output that do not start with '#'."""
    return bool(line.strip()) and not line.lstrip().startswith("#")


def footer(records: Sequence[Record]) -> str:
    busbw = [r["busbw_GBps"] for r in records]
    average = sum(busbw) / len(busbw) if busbw else 0.0
    return f"# Avg bus bandwidth    : {average:.3f}"


def write_json_lines(records: Iterable[Record], stream: TextIO) -> None:
    for rec in records:
        stream.write(json.dumps(rec, sort_keys=True) + "\n")
    stream.flush()


def read_json_lines(path: str) -> list[Record]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def comparison(records: Sequence[Record], libs: Sequence[str], markdown: bool = False) -> list[str]:
    """One table per (collective, ranks): each library's time and busbw per size, and t(first lib) / t(other)."""
    base, others = libs[0], list(libs[1:])
    by_key: dict[tuple, dict[str, Record]] = {}
    for rec in records:
        by_key.setdefault((rec["coll"], rec["ranks"], rec["bytes"]), {})[rec["lib"]] = rec
    tables: dict[tuple[str, int], list[int]] = {}
    for coll, ranks, nbytes in by_key:
        tables.setdefault((coll, ranks), []).append(nbytes)
    lines: list[str] = []
    for (coll, ranks), sizes in tables.items():
        sample = next(iter(by_key[(coll, ranks, sizes[0])].values()))
        title = (f"{coll}, {ranks} ranks, {sample['dtype']}" + (f", {sample['op']}" if sample["op"] != "none" else "")
                 + f": time in us (median over iterations of the slowest rank), busbw in GB/s, "
                 f"ratio = t({base}) / t(lib), below 1 = {base} faster")
        cells = [["size", f"{base} us", f"{base} busbw"]]
        for lib in others:
            cells[0] += [f"{lib} us", f"{lib} busbw", f"{base}/{lib}"]
        for nbytes in sorted(sizes):
            found = by_key[(coll, ranks, nbytes)]
            mine = found.get(base)
            line = [human_bytes(nbytes) if markdown else str(nbytes)] + _time_bw(mine)
            for lib in others:
                theirs = found.get(lib)
                ratio = "-"
                if mine and theirs and theirs["time_us"] > 0:
                    ratio = f"{mine['time_us'] / theirs['time_us']:.2f}"
                line += _time_bw(theirs) + [ratio]
            cells.append(line)
        lines += _render(title, cells, markdown)
    return lines


def _time_bw(rec: Record | None) -> list[str]:
    if rec is None:
        return ["-", "-"]
    return [format_time(rec["time_us"]), f"{rec['busbw_GBps']:.2f}"]


def _render(title: str, cells: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        head, *body = cells
        return ([f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
                + ["| " + " | ".join(line) + " |" for line in body] + [""])
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    out = [f"# {title}"]
    for index, line in enumerate(cells):
        out.append(("# " if index == 0 else "  ") + "  ".join(cell.rjust(width) for cell, width in zip(line, widths)))
    return out + [""]


def plot(records: Sequence[Record], path: str) -> None:
    """busbw against size, one panel per collective, one line per (library, ranks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = list(dict.fromkeys(r["coll"] for r in records))
    fig, axes = plt.subplots(len(colls), 1, figsize=(8, 3.2 * max(len(colls), 1)), squeeze=False)
    for ax, coll in zip(axes[:, 0], colls):
        series: dict[str, list[Record]] = {}
        for rec in records:
            if rec["coll"] == coll:
                series.setdefault(f"{rec['lib']} ({rec['ranks']} ranks)", []).append(rec)
        for label, recs in series.items():
            recs.sort(key=lambda r: r["bytes"])
            ax.plot([r["bytes"] for r in recs], [r["busbw_GBps"] for r in recs], marker="o", markersize=3, label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(coll)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


class Progress:
    """A one-line bar on a terminal: rows done out of the sweep's total, and time elapsed."""

    def __init__(self, total: int, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.total, self.done = max(total, 1), 0
        self._stream, self._width = stream, width
        self._start = time.monotonic()
        self._shown = False

    def advance(self, rows: int = 1) -> None:
        self.done = min(self.done + rows, self.total)
        self.draw()

    def draw(self) -> None:
        filled = self._width * self.done // self.total
        bar = "=" * filled + (">" if filled < self._width else "") + " " * max(self._width - filled - 1, 0)
        elapsed = time.monotonic() - self._start
        self._stream.write(f"\r[{bar}] {self.done}/{self.total} rows, {elapsed:.0f} s")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._shown = False

    def note(self, text: str) -> None:
        """A line of its own, above the bar."""
        self.clear()
        self._stream.write(text + "\n")
        self._stream.flush()
        if self.done:
            self.draw()


class RowStream:
    """A text stream for a job's stdout: forwards it (or not) and moves the progress bar on each table row."""

    def __init__(self, forward: TextIO | None, progress: Progress | None) -> None:
        self._forward, self._progress = forward, progress
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if self._forward is not None:
                if self._progress is not None:
                    self._progress.clear()
                self._forward.write(line + "\n")
                self._forward.flush()
            if self._progress is not None:
                if is_row(line):
                    self._progress.advance()
                elif self._forward is not None and self._progress.done:
                    self._progress.draw()
        return len(text)

    def flush(self) -> None:
        if self._forward is not None:
            self._forward.flush()

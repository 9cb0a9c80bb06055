"""Type maps as runs of bytes, and moving a buffer's bytes through them (pack into one array, unpack back).

A type map is kept as rows of (byte offset, length): the entries of a
derived type with neighbouring entries merged, so a vector of doubles is
one run per block and a contiguous type one run. Moving `count` elements
picks the cheapest numpy form: one slice for a single run, a strided view
when the runs are equal and evenly spaced (vectors, most subarrays), rows
of a sliding window when they are equal but uneven (indexed blocks), and a
byte index only when run lengths differ.
"""

from __future__ import annotations

import ctypes

import numpy as np

from meshcomm.mpi.datatypes import Datatype, _Type


def runs(t: _Type) -> np.ndarray:
    """The type map of one element of `t` as (offset, length) rows, merged; built once per type."""
    if t.runs is None:
        t.runs = merged(_unmerged(t))
    return t.runs


def _unmerged(t: _Type) -> np.ndarray:
    if not t.blocks:  # a predefined type: its bytes, less the padding of a MINLOC/MAXLOC pair
        fields = t.dtype.fields if t.dtype is not None else None
        if fields:
            return np.array([[offset, dtype.itemsize] for dtype, offset in fields.values()], dtype=np.int64)
        return np.array([[0, t.size]], dtype=np.int64)
    parts = []
    for inner_type, starts, counts in t.blocks:
        starts, counts = np.asarray(starts, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        keep = counts > 0
        starts, counts = starts[keep], counts[keep]
        inner, extent = runs(inner_type), inner_type.ub - inner_type.lb
        if len(inner) == 1 and inner[0, 1] == extent:  # dense copies: a block is one run
            parts.append(np.column_stack([starts + inner[0, 0], counts * extent]))
            continue
        total = int(counts.sum())
        first = np.repeat(np.cumsum(counts) - counts, counts)
        copies = np.repeat(starts, counts) + (np.arange(total, dtype=np.int64) - first) * extent
        offsets = (copies[:, None] + inner[None, :, 0]).reshape(-1)
        parts.append(np.column_stack([offsets, np.tile(inner[:, 1], total)]))
    return np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)


def merged(rows: np.ndarray) -> np.ndarray:
    """Drop empty runs and join each run to the next where it ends exactly where the next begins."""
    rows = rows[rows[:, 1] > 0]
    if len(rows) < 2:
        return rows.astype(np.int64, copy=False)
    ends = rows[:-1, 0] + rows[:-1, 1]
    heads = np.concatenate([[0], np.nonzero(ends != rows[1:, 0])[0] + 1])
    return np.column_stack([rows[heads, 0], np.add.reduceat(rows[:, 1], heads)])


def element_runs(datatype: Datatype, count: int, origin: int = 0) -> np.ndarray:
    """The runs of `count` consecutive elements (each an extent after the last), shifted by `origin` bytes."""
    t = datatype._t
    one, extent = runs(t), t.ub - t.lb
    if count == 1 or not len(one):
        rows = one if count == 1 else one[:0]
    elif len(one) == 1 and one[0, 1] == extent:
        rows = np.array([[one[0, 0], count * extent]], dtype=np.int64)
    else:
        offsets = (np.arange(count, dtype=np.int64)[:, None] * extent + one[None, :, 0]).reshape(-1)
        rows = merged(np.column_stack([offsets, np.tile(one[:, 1], count)]))
    return rows + np.array([origin, 0], dtype=np.int64) if origin else rows


def span(rows: np.ndarray) -> tuple[int, int]:
    """The lowest and one-past-highest byte the runs touch ((0, 0) for none)."""
    if not len(rows):
        return 0, 0
    return int(rows[:, 0].min()), int((rows[:, 0] + rows[:, 1]).max())


def memory_at(low: int, high: int) -> np.ndarray:
    """Bytes [low, high) of this process's memory, as absolute addresses (MPI.BOTTOM with Get_address)."""
    if high <= low:
        return np.empty(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * (high - low)).from_address(low))


def _view(mem: np.ndarray, rows: np.ndarray, writeable: bool) -> np.ndarray | None:
    """The runs as one (n, length) view of `mem` when they are equal and evenly spaced; None otherwise."""
    lengths, offsets = rows[:, 1], rows[:, 0]
    if (lengths != lengths[0]).any():
        return None
    if len(rows) == 1:
        return mem[offsets[0] : offsets[0] + lengths[0]][None, :]
    steps = np.diff(offsets)
    if (steps != steps[0]).any():
        return None
    return np.lib.stride_tricks.as_strided(mem[offsets[0] :], shape=(len(rows), int(lengths[0])),
                                           strides=(int(steps[0]), 1), writeable=writeable)


def _byte_index(rows: np.ndarray) -> np.ndarray:
    lengths = rows[:, 1]
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(rows[:, 0], lengths) + np.arange(int(lengths.sum()), dtype=np.int64) - first


def gather(mem: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The bytes the runs cover, in order, as a new contiguous uint8 array (the runs must lie inside mem)."""
    if not len(rows):
        return np.empty(0, dtype=np.uint8)
    view = _view(mem, rows, writeable=False)
    if view is not None:
        return np.ascontiguousarray(view).reshape(-1)
    if (rows[:, 1] == rows[0, 1]).all():
        windows = np.lib.stride_tricks.sliding_window_view(mem, int(rows[0, 1]))
        return windows[rows[:, 0]].reshape(-1)
    return mem[_byte_index(rows)]


def scatter(mem: np.ndarray, rows: np.ndarray, data: np.ndarray) -> None:
    """Write `data` (uint8, as many bytes as the runs cover) back over the runs, in order."""
    if not len(rows):
        return
    view = _view(mem, rows, writeable=True)
    if view is not None:
        view[...] = data.reshape(view.shape)
    elif (rows[:, 1] == rows[0, 1]).all():
        windows = np.lib.stride_tricks.sliding_window_view(mem, int(rows[0, 1]), writeable=True)
        windows[rows[:, 0]] = data.reshape(len(rows), -1)
    else:
        mem[_byte_index(rows)] = data

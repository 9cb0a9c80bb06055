"""Runs one rank's Schedule over a transport.

Each step posts all its messages at once. Messages larger than the chunk
size are cut into pieces that share one key, so the receiver can reduce the
first piece while later pieces are still on the wire; the transport's
per-pair ordering keeps the pieces in order.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from meshcomm.algorithms.schedule import Copy, Recv, RecvReduce, Reduce, Schedule, Send, Slice
from meshcomm.errors import CollectiveMismatchError, CommTimeoutError, MessageSizeError
from meshcomm.executor import fingerprint as fp
from meshcomm.executor.reduce_ops import Combine
from meshcomm.transport.buffers import byte_view as _bytes
from meshcomm.transport.header import KIND_COLLECTIVE, Key


@dataclass
class Call:
    """Everything one rank knows about the collective it runs."""

    schedule: Schedule
    buffers: dict  # "input"/"output"/"scratch" -> flat ndarray (same dtype)
    combine: Combine | None
    peers: list  # group rank -> transport rank
    group_id: int
    group_name: str
    seq: int
    fingerprint: bytes
    chunk_bytes: int
    timeout: float


def run(call: Call, transport) -> None:
    """Execute the schedule; raise the first failure with the collective named."""
    schedule = call.schedule
    buffers = dict(call.buffers)
    dtype = _dtype(buffers)
    if "scratch" not in buffers:
        buffers["scratch"] = _reusable(dtype, schedule.scratch, "scratch")
    for name in ("input", "output"):
        buffers.setdefault(name, np.empty(0, dtype=dtype))
    deadline = time.monotonic() + call.timeout
    for index, step in enumerate(schedule.steps):
        try:
            _run_step(call, transport, buffers, index, step, deadline)
        except (CollectiveMismatchError, MessageSizeError) as exc:
            raise _mismatch(call, index, exc) from None
        except CommTimeoutError as exc:
            raise CommTimeoutError(
                f"{fp.describe(call.fingerprint)} seq {call.seq} in group {call.group_name!r}, "
                f"step {index} of {schedule.algorithm}: {exc}"
            ) from None


def _dtype(buffers: dict) -> np.dtype:
    for array in buffers.values():
        if array is not None:
            return array.dtype
    return np.dtype(np.uint8)


def _view(buffers: dict, where: Slice) -> np.ndarray:
    array = buffers[where.buf]
    return array[where.offset : where.end]


_pool = threading.local()


def _reusable(dtype: np.dtype, count: int, role: str) -> np.ndarray:
    """A work array kept per thread and role: a fresh 64 MiB array costs more in
    page faults than the copy it serves. Nothing outlives one step's use of it."""
    arrays = _pool.__dict__.setdefault("arrays", {})
    nbytes = count * dtype.itemsize
    held = arrays.get(role)
    if held is None or held.nbytes < nbytes:
        held = arrays[role] = np.empty(max(nbytes, 64), dtype=np.uint8)
    return held[:nbytes].view(dtype)


def _pieces(count: int, itemsize: int, chunk_bytes: int) -> list[tuple[int, int]]:
    per_piece = max(chunk_bytes // max(itemsize, 1), 1)
    if count <= per_piece:
        return [(0, count)]
    return [(start, min(start + per_piece, count)) for start in range(0, count, per_piece)]


def _run_step(call: Call, transport, buffers: dict, index: int, step: tuple, deadline: float) -> None:
    combine = call.combine
    for op in step:
        if isinstance(op, Copy):
            _view(buffers, op.dst)[...] = _view(buffers, op.src)
        elif isinstance(op, Reduce):
            combine(_view(buffers, op.dst), _view(buffers, op.src))
    key = Key(KIND_COLLECTIVE, call.group_id, call.seq, index)
    handles = []
    reductions = []  # (handle, destination piece, received piece)
    for number, op in enumerate(step):
        if isinstance(op, Send):
            data = _view(buffers, op.src)
            for lo, hi in _pieces(data.size, data.itemsize, call.chunk_bytes):
                handles.append(transport.isend(call.peers[op.peer], _bytes(data[lo:hi]), key, call.fingerprint))
        elif isinstance(op, Recv):
            dst = _view(buffers, op.dst)
            for lo, hi in _pieces(dst.size, dst.itemsize, call.chunk_bytes):
                handles.append(transport.irecv(call.peers[op.peer], _bytes(dst[lo:hi]), key, call.fingerprint))
        elif isinstance(op, RecvReduce):
            dst = _view(buffers, op.dst)
            incoming = _reusable(dst.dtype, dst.size, f"incoming {number}")
            for lo, hi in _pieces(dst.size, dst.itemsize, call.chunk_bytes):
                handle = transport.irecv(call.peers[op.peer], _bytes(incoming[lo:hi]), key, call.fingerprint)
                handles.append(handle)
                reductions.append((handle, dst[lo:hi], incoming[lo:hi]))
    if not reductions:
        transport.wait(handles, timeout=max(deadline - time.monotonic(), 0.0))
        return
    # Reduce each piece as soon as it lands, while the rest are still arriving.
    while reductions:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            transport.wait([h for h, _, _ in reductions], timeout=0.0)
        still = []
        for handle, dst, incoming in reductions:
            if handle.done:
                if handle.error is not None:
                    raise handle.error
                combine(dst, incoming)
            else:
                still.append((handle, dst, incoming))
        reductions = still
        if reductions:
            transport.progress(min(remaining, 0.05))
    transport.wait(handles, timeout=max(deadline - time.monotonic(), 0.0))


def _mismatch(call: Call, step: int, exc: Exception) -> CollectiveMismatchError:
    peer = getattr(exc, "peer", None)
    theirs = getattr(exc, "theirs", None)
    peer_rank = call.peers.index(peer) if peer in call.peers else peer
    mine = fp.describe(call.fingerprint)
    if theirs is not None and theirs != call.fingerprint:
        detail = f"rank {peer_rank} called {fp.describe(theirs)}"
    else:
        detail = f"sizes disagree: {exc}"
    return CollectiveMismatchError(
        f"collective mismatch in group {call.group_name!r} at seq {call.seq}, step {step}: "
        f"this rank called {mine} but {detail}"
    )

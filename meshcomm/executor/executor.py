"""Runs one rank's Schedule over a transport.

Each step posts all its messages at once. Messages larger than the chunk
size are cut into pieces that share one key, so the receiver can reduce the
first piece while later pieces are still on the wire; the transport's
per-pair ordering keeps the pieces in order. (all_gather and all_to_all send
theirs whole: see _WHOLE_MESSAGES.) Pieces to be reduced land in a
few piece-sized slots used in turn (a receive is posted again as soon as its
slot has been reduced), so what is reduced is still in the cache instead of
in a message-sized array that went out to memory and back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from meshcomm.algorithms.schedule import Copy, Recv, RecvReduce, Reduce, Schedule, Send
from meshcomm.errors import CollectiveMismatchError, CommTimeoutError, MessageSizeError
from meshcomm.executor import fingerprint as fp
from meshcomm.executor.reduce_ops import Combine
from meshcomm.transport.buffers import byte_view as _bytes
from meshcomm.transport.header import KIND_COLLECTIVE, Key


@dataclass
class Execution:
    """Everything one rank knows about the collective it runs as messages."""

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
    trace: object = None  # a meshcomm.trace TraceWriter when MESHCOMM_TRACE is set


def run(call: Execution, transport) -> None:
    """Execute the schedule; raise the first failure with the collective named."""
    if call.trace is None:
        _run(call, transport, _run_step)
    else:
        _run_traced(call, transport)


def _run(call: Execution, transport, run_step) -> None:
    schedule = call.schedule
    buffers = dict(call.buffers)
    dtype = _dtype(buffers)
    if "scratch" not in buffers:
        buffers["scratch"] = reusable(dtype, schedule.scratch, "scratch")
    for name in ("input", "output"):
        if name not in buffers:
            buffers[name] = np.empty(0, dtype=dtype)
    deadline = time.monotonic() + call.timeout
    for index, step in enumerate(_plan(schedule, dtype.itemsize, call.chunk_bytes)):
        try:
            run_step(call, transport, buffers, dtype, index, step, deadline)
        except (CollectiveMismatchError, MessageSizeError, CommTimeoutError) as exc:
            if getattr(exc, "from_notice", False):
                raise  # another rank's failure, passed on to this one: already says what happened
            if not isinstance(exc, CommTimeoutError):
                raise _mismatch(call, index, exc) from None
            raise CommTimeoutError(
                f"{fp.describe(call.fingerprint)} seq {call.seq} in group {call.group_name!r}, "
                f"step {index} of {schedule.algorithm}, did not finish within its timeout of {call.timeout:g} s: {exc}"
            ) from None


def _run_traced(call: Execution, transport) -> None:
    """Run as `run` does, writing one event for the collective and one per step."""
    trace = call.trace
    schedule = call.schedule
    where = {"group": call.group_name, "group_id": call.group_id, "seq": call.seq, "algorithm": schedule.algorithm}
    step_args = trace.encode(where)[:-1] + ',"step":'  # encoded once per call, completed per step

    def traced_step(call, transport, buffers, dtype, index, step, deadline) -> None:
        start = trace.now()
        try:
            _run_step(call, transport, buffers, dtype, index, step, deadline)
        finally:
            trace.complete("step", f"step {index}", start, trace.now(), f"{step_args}{index}}}")

    sizes = {f"{name}_bytes": int(array.nbytes) for name, array in call.buffers.items() if array is not None}
    dtype = _dtype(call.buffers)
    start = trace.now()
    try:
        _run(call, transport, traced_step)
    finally:
        args = {**where, "call": fp.describe(call.fingerprint), "dtype": str(dtype), **sizes, "steps": len(schedule.steps)}
        trace.complete("collective", schedule.collective, start, trace.now(), args)


def _dtype(buffers: dict) -> np.dtype:
    for array in buffers.values():
        if array is not None:
            return array.dtype
    return np.dtype(np.uint8)


_pool = threading.local()


def reusable(dtype: np.dtype, count: int, role: str) -> np.ndarray:
    """A work array kept per thread and role: a fresh 64 MiB array costs more in
    page faults than the copy it serves. Nothing outlives one step's use of it."""
    arrays = _pool.__dict__.setdefault("arrays", {})
    nbytes = count * dtype.itemsize
    held = arrays.get(role)
    if held is None or held.nbytes < nbytes:
        held = arrays[role] = np.empty(max(nbytes, 64), dtype=np.uint8)
    return held[:nbytes].view(dtype)


# A step, compiled once per (schedule, itemsize, chunk size): the schedule's
# objects are walked and its messages cut into pieces once, not on every call,
# which is most of a small collective's cost in Python.
_SEND, _RECV, _RECV_REDUCE = 0, 1, 2
_COPY, _REDUCE = 0, 1
_SLOTS = 4  # pieces of one received-and-reduced message in flight at once


class _Step(NamedTuple):
    local: tuple  # (_COPY | _REDUCE, dst buffer, dst lo, dst hi, src buffer, src lo, src hi)
    # in listed order: (_SEND | _RECV, peer, buffer, lo, hi, message bytes or None: not by reference) per piece,
    # (_RECV_REDUCE, i, ...) per op
    comms: tuple
    recv_reduces: tuple  # (peer, dst buffer, pieces ((lo, hi), ...), slot roles, elements per slot)


_plans: dict[tuple[int, int, int], tuple[Schedule, tuple[_Step, ...]]] = {}
_PLANS_KEPT = 1024


# all_gather's and all_to_all's messages go whole: their steps exchange, so large ones go by reference and
# pieces would only add per-piece work. The others cut theirs, to reduce in cache-sized slots and to stream
# (docs/transports.md, "Streaming and chunks"). Both ends cut a message alike: both run the same collective.
_WHOLE_MESSAGES = ("all_gather", "all_to_all")
_WHOLE = 1 << 62


def _plan(schedule: Schedule, itemsize: int, chunk_bytes: int) -> tuple[_Step, ...]:
    if schedule.collective in _WHOLE_MESSAGES:
        chunk_bytes = _WHOLE
    key = (id(schedule), itemsize, chunk_bytes)
    cached = _plans.get(key)
    if cached is not None and cached[0] is schedule:  # the schedule is kept alive, so its id is not reused
        return cached[1]
    if len(_plans) >= _PLANS_KEPT:
        _plans.clear()
    steps = tuple(_compile(step, itemsize, chunk_bytes) for step in schedule.steps)
    _plans[key] = (schedule, steps)
    return steps


def _compile(step: tuple, itemsize: int, chunk_bytes: int) -> _Step:
    local, comms, recv_reduces = [], [], []
    # Receives from one peer match in the order they are posted. Re-posting into
    # a freed slot would post a piece after a later-listed receive from the same
    # peer, so a step receiving twice from one peer gives every piece its own slot.
    sources = [op.peer for op in step if isinstance(op, (Recv, RecvReduce))]
    window = _SLOTS if len(sources) == len(set(sources)) else None
    # A step that only sends (a broadcast's root) streams its messages: passed by
    # reference, the receiver would copy every byte while this rank sat idle.
    by_reference = bool(sources)
    for number, op in enumerate(step):
        if isinstance(op, (Copy, Reduce)):
            kind = _COPY if isinstance(op, Copy) else _REDUCE
            local.append((kind, op.dst.buf, op.dst.offset, op.dst.end, op.src.buf, op.src.offset, op.src.end))
        elif isinstance(op, (Send, Recv)):
            where = op.src if isinstance(op, Send) else op.dst
            kind = _SEND if isinstance(op, Send) else _RECV
            for lo, hi in _pieces(where.count, itemsize, chunk_bytes):
                comms.append((kind, op.peer, where.buf, where.offset + lo, where.offset + hi,
                              where.count * itemsize if by_reference else None))
        elif isinstance(op, RecvReduce):
            where = op.dst
            pieces = tuple((where.offset + lo, where.offset + hi) for lo, hi in _pieces(where.count, itemsize, chunk_bytes))
            slots = len(pieces) if window is None else min(window, len(pieces))
            roles = tuple(f"incoming {number} slot {slot}" for slot in range(slots))
            comms.append((_RECV_REDUCE, len(recv_reduces), "", 0, 0, 0))
            recv_reduces.append((op.peer, where.buf, pieces, roles, max(hi - lo for lo, hi in pieces)))
    return _Step(tuple(local), tuple(comms), tuple(recv_reduces))


def _pieces(count: int, itemsize: int, chunk_bytes: int) -> list[tuple[int, int]]:
    per_piece = max(chunk_bytes // max(itemsize, 1), 1)
    if count <= per_piece:
        return [(0, count)]
    return [(start, min(start + per_piece, count)) for start in range(0, count, per_piece)]


def _run_step(call: Execution, transport, buffers: dict, dtype: np.dtype, index: int, step: _Step, deadline: float) -> None:
    combine = call.combine
    for kind, dst, dst_lo, dst_hi, src, src_lo, src_hi in step.local:
        if kind == _COPY:
            buffers[dst][dst_lo:dst_hi] = buffers[src][src_lo:src_hi]
        else:
            combine(buffers[dst][dst_lo:dst_hi], buffers[src][src_lo:src_hi])
    if not step.comms:
        return
    key = Key(KIND_COLLECTIVE, call.group_id, call.seq, index)
    peers, fingerprint = call.peers, call.fingerprint
    handles = []
    in_flight = []  # [handle, destination piece, received piece, slot, peer, destination buffer, pieces left]

    def post(slot: np.ndarray, peer: int, target: np.ndarray, left: list) -> None:
        lo, hi = left.pop()
        incoming = slot[: hi - lo]
        handle = transport.irecv(peers[peer], _bytes(incoming), key, fingerprint)
        in_flight.append((handle, target[lo:hi], incoming, slot, peer, target, left))

    for kind, peer, name, lo, hi, message_bytes in step.comms:
        if kind == _SEND:
            handles.append(transport.isend(peers[peer], _bytes(buffers[name][lo:hi]), key, fingerprint, message_bytes))
        elif kind == _RECV:
            handles.append(transport.irecv(peers[peer], _bytes(buffers[name][lo:hi]), key, fingerprint))
        else:  # a received-and-reduced message: `peer` holds its index in step.recv_reduces
            source, name, pieces, roles, slot_count = step.recv_reduces[peer]
            left = list(reversed(pieces))  # popped from the end, in piece order
            for role in roles:
                post(reusable(dtype, slot_count, role), source, buffers[name], left)
    if in_flight:
        _reduce_as_they_land(call, transport, in_flight, post, deadline)
    transport.wait(handles, timeout=max(deadline - time.monotonic(), 0.0))


def _reduce_as_they_land(call: Execution, transport, in_flight: list, post, deadline: float) -> None:
    """Reduce each piece as soon as it lands, then receive the next piece into its slot."""
    combine = call.combine
    while in_flight:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            transport.wait([entry[0] for entry in in_flight], timeout=0.0)
        landed = [entry for entry in in_flight if entry[0].done]
        if not landed:
            transport.progress(min(remaining, 0.05))
            continue
        in_flight[:] = [entry for entry in in_flight if not entry[0].done]  # post() appends to this list
        for handle, dst, incoming, slot, peer, target, left in landed:
            if handle.error is not None:
                raise handle.error
            combine(dst, incoming)
            if left:
                post(slot, peer, target, left)


def _mismatch(call: Execution, step: int, exc: Exception) -> CollectiveMismatchError:
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

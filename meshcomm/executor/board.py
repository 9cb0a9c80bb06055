"""The `direct` algorithms run on a group's board (meshcomm/transport/board.py).

Every rank publishes what its peers need from it (its whole input, or
nothing when nobody reads it), waits until every rank has published the
same call, checks that they all called the same collective, and computes
its output from the published bytes exactly as the `direct` schedule does:
contributions combined in rank order, so every rank's result is
bit-identical and equal to the schedule's. One synchronisation per call,
whatever the group's size.
"""

from __future__ import annotations

import functools
import time
from typing import Callable, NamedTuple

import numpy as np

from meshcomm.algorithms.problem import Problem
from meshcomm.errors import CollectiveMismatchError, CommTimeoutError
from meshcomm.executor import fingerprint as fp
from meshcomm.executor.reduce_ops import Combine
from meshcomm.transport.buffers import byte_view


# Bytes one member may publish on a group's board; larger `direct` calls go as messages.
SLOT_BYTES = 64 << 10
_NOTHING = memoryview(b"")


def published_count(problem: Problem, rank: int) -> int:
    """Elements `rank` puts on the board: what at least one peer reads from it."""
    c = problem.collective
    if c == "broadcast":
        return problem.count if rank == problem.root else 0
    if c == "barrier":
        return 0
    return problem.input_count(rank)


@functools.lru_cache(maxsize=1024)
def read_from(problem: Problem, rank: int) -> tuple[int, ...]:
    """The members whose slots `rank` reads (and so waits for): everyone, or just the root, or nobody."""
    c, n, root = problem.collective, problem.nranks, problem.root
    if c == "broadcast":
        return () if rank == root else (root,)
    if c == "reduce" and rank != root:
        return ()
    return tuple(m for m in range(n) if m != rank)


@functools.lru_cache(maxsize=256)
def largest_post(problem: Problem) -> int:
    """The most elements any rank of `problem` publishes (every rank computes the same)."""
    return max(published_count(problem, r) for r in range(problem.nranks))


def fits(problem: Problem, itemsize: int) -> bool:
    """Whether the board can take this call (its group sharing memory aside)."""
    return (problem.collective in COLLECTIVES and problem.nranks > 1
            and largest_post(problem) * itemsize <= SLOT_BYTES)


class Plan(NamedTuple):
    """What rank `me` derives from a problem for its board calls, once per problem instead of on every call."""

    problem: Problem
    me: int
    count: int  # elements it publishes
    read: tuple[int, ...]  # members whose slots it reads
    compute: Callable  # compute(part, out, combine): its output from part(member), the members' published arrays


def plan(problem: Problem, me: int) -> Plan:
    """Rank `me`'s plan for `problem` (a collective the board runs, see fits)."""
    compute = _COMPUTE[problem.collective](problem, me)
    return Plan(problem, me, published_count(problem, me), read_from(problem, me), compute)


def run(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine | None,
        timeout: float, spin: float, between, group_name: str, peers) -> None:
    """One collective on the board; `between(missing)` raises when a missing member is lost or the call is given up.

    `peers` maps group ranks to transport ranks (for naming a rank that sent a message instead)."""
    me, count, read = plan.me, plan.count, plan.read
    deadline = time.monotonic() + timeout
    if count:
        source = buffers["input"]
        payload = byte_view(source if count == source.size else source[:count])
    else:
        payload = _NOTHING
    try:
        board.post(me, seq, fingerprint, payload, spin, deadline, between)
        board.wait(me, seq, read, spin, deadline, between)
    except TimeoutError as exc:
        raise CommTimeoutError(
            f"{fp.describe(fingerprint)} seq {seq} in group {group_name!r}, on the group's shared-memory board, "
            f"did not finish within its timeout of {timeout:g} s: {exc}"
        ) from None
    except CollectiveMismatchError as exc:
        if getattr(exc, "from_notice", False) or getattr(exc, "theirs", None) is None:
            raise
        raise _mismatch(group_name, seq, fingerprint, peers.index(exc.peer), exc.theirs, " as messages") from None
    member = board.agree(read, seq, fingerprint)
    if member is not None:
        raise _mismatch(group_name, seq, fingerprint, member, board.fingerprint(member, seq), "")
    output = buffers.get("output")  # a barrier has none, and computes nothing
    if output is not None:
        dtype = output.dtype
        plan.compute(lambda member: board.array(member, seq, dtype), output, combine)


def _mismatch(group_name: str, seq: int, fingerprint: bytes, member: int, theirs: bytes,
              how: str) -> CollectiveMismatchError:
    called = f"called {fp.describe(theirs)}" if theirs != fingerprint else "ran it with another algorithm"
    return CollectiveMismatchError(
        f"collective mismatch in group {group_name!r} at seq {seq}: this rank called {fp.describe(fingerprint)} "
        f"on the group's shared-memory board but rank {member} {called}{how}"
    )


# Each collective's computation, specialised for one problem and rank: part(member) is what
# `member` published, out this rank's output.


def _combined(n: int, part, out: np.ndarray, combine: Combine) -> None:
    """out = part(0) op part(1) op ... op part(n - 1), in rank order as the schedule reduces."""
    np.copyto(out, part(0))
    for member in range(1, n):
        combine(out, part(member))


def _nothing(part, out, combine) -> None:
    pass


def _all_reduce(problem: Problem, me: int) -> Callable:
    return functools.partial(_combined, problem.nranks)


def _reduce(problem: Problem, me: int) -> Callable:
    return functools.partial(_combined, problem.nranks) if me == problem.root else _nothing


def _broadcast(problem: Problem, me: int) -> Callable:
    root = problem.root
    if me == root:
        return _nothing

    def compute(part, out, combine) -> None:
        np.copyto(out, part(root))

    return compute


def _all_gather(problem: Problem, me: int) -> Callable:
    offsets = problem.offsets()
    blocks = [(member, offsets[member], offsets[member + 1]) for member in range(problem.nranks)]

    def compute(part, out, combine) -> None:
        for member, lo, hi in blocks:
            out[lo:hi] = part(member)

    return compute


def _reduce_scatter(problem: Problem, me: int) -> Callable:
    n = problem.nranks
    lo, hi = problem.offsets()[me : me + 2]

    def compute(part, out, combine) -> None:
        _combined(n, lambda member: part(member)[lo:hi], out, combine)

    return compute


def _all_to_all(problem: Problem, me: int) -> Callable:
    pieces = []  # (member, start in its row, count, where it goes in our output)
    at = 0
    for member in range(problem.nranks):
        start = sum(problem.matrix(member, j) for j in range(me))
        count = problem.matrix(member, me)
        pieces.append((member, start, count, at))
        at += count

    def compute(part, out, combine) -> None:
        for member, start, count, at in pieces:
            out[at : at + count] = part(member)[start : start + count]

    return compute


def _barrier(problem: Problem, me: int) -> Callable:
    return _nothing


_COMPUTE = {
    "all_reduce": _all_reduce,
    "reduce": _reduce,
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "barrier": _barrier,
}
COLLECTIVES = frozenset(_COMPUTE)

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


def run(board, problem: Problem, me: int, seq: int, fingerprint: bytes, buffers: dict, combine: Combine | None,
        timeout: float, spin: float, between, group_name: str, peers: list[int]) -> None:
    """One collective on the board; `between(missing)` raises when a missing member is lost or the call is given up.

    `peers` maps group ranks to transport ranks (for naming a rank that sent a message instead)."""
    source = buffers.get("input")
    count = published_count(problem, me)
    deadline = time.monotonic() + timeout

    def mismatch(member: int, theirs: bytes, how: str) -> CollectiveMismatchError:
        called = f"called {fp.describe(theirs)}" if theirs != fingerprint else "ran it with another algorithm"
        return CollectiveMismatchError(
            f"collective mismatch in group {group_name!r} at seq {seq}: this rank called {fp.describe(fingerprint)} "
            f"on the group's shared-memory board but rank {member} {called}{how}"
        )

    read = read_from(problem, me)
    try:
        board.post(me, seq, fingerprint, byte_view(source[:count]) if count else _NOTHING, spin, deadline, between)
        board.wait(me, seq, read, spin, deadline, between)
    except TimeoutError as exc:
        raise CommTimeoutError(
            f"{fp.describe(fingerprint)} seq {seq} in group {group_name!r}, on the group's shared-memory board, "
            f"did not finish within its timeout of {timeout:g} s: {exc}"
        ) from None
    except CollectiveMismatchError as exc:
        if getattr(exc, "from_notice", False) or getattr(exc, "theirs", None) is None:
            raise
        raise mismatch(peers.index(exc.peer), exc.theirs, " as messages") from None
    for member in read:
        theirs = board.fingerprint(member, seq)
        if theirs != fingerprint:
            raise mismatch(member, theirs, "")

    output = buffers.get("output")  # a barrier has none, and computes nothing

    def contribution(member: int) -> np.ndarray:
        return np.frombuffer(board.data(member, seq), dtype=output.dtype)

    _COMPUTE[problem.collective](problem, me, contribution, output, combine)


def _combined(n: int, part, out: np.ndarray, combine: Combine) -> None:
    """out = part(0) op part(1) op ... op part(n - 1), in rank order as the schedule reduces."""
    np.copyto(out, part(0))
    for member in range(1, n):
        combine(out, part(member))


def _all_reduce(problem, me, contribution, out, combine) -> None:
    _combined(problem.nranks, contribution, out, combine)


def _reduce(problem, me, contribution, out, combine) -> None:
    if me == problem.root:
        _combined(problem.nranks, contribution, out, combine)


def _broadcast(problem, me, contribution, out, combine) -> None:
    if me != problem.root:
        np.copyto(out, contribution(problem.root))


def _all_gather(problem, me, contribution, out, combine) -> None:
    offsets = problem.offsets()
    for member in range(problem.nranks):
        out[offsets[member] : offsets[member + 1]] = contribution(member)


def _reduce_scatter(problem, me, contribution, out, combine) -> None:
    lo, hi = problem.offsets()[me : me + 2]
    _combined(problem.nranks, lambda member: contribution(member)[lo:hi], out, combine)


def _all_to_all(problem, me, contribution, out, combine) -> None:
    n = problem.nranks
    at = 0
    for member in range(n):
        start = sum(problem.matrix(member, j) for j in range(me))
        count = problem.matrix(member, me)
        out[at : at + count] = contribution(member)[start : start + count]
        at += count


def _barrier(problem, me, contribution, out, combine) -> None:
    pass


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

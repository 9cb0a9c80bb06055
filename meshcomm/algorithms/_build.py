"""Helpers shared by the algorithm modules: a step builder and tree arithmetic."""

from __future__ import annotations

from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import (
    INPUT,
    OUTPUT,
    SCRATCH,
    Copy,
    Op,
    Recv,
    RecvReduce,
    Reduce,
    Schedule,
    Send,
    Slice,
)


class StepBuilder:
    """Collects one rank's operations by step index, then freezes them into a Schedule.

    Steps are indexed globally so that every rank's step k matches its peers'
    step k (the executor tags messages with the step). Operations of zero
    elements are dropped: both sides compute the same counts, so they agree on
    which messages exist without exchanging anything.
    """

    def __init__(self) -> None:
        self._local: list[list[Op]] = []
        self._comm: list[list[Op]] = []

    def _grow(self, step: int) -> None:
        while len(self._local) <= step:
            self._local.append([])
            self._comm.append([])

    def send(self, step: int, peer: int, src: Slice) -> None:
        if src.count:
            self._grow(step)
            self._comm[step].append(Send(peer, src))

    def recv(self, step: int, peer: int, dst: Slice) -> None:
        if dst.count:
            self._grow(step)
            self._comm[step].append(Recv(peer, dst))

    def recv_reduce(self, step: int, peer: int, dst: Slice) -> None:
        if dst.count:
            self._grow(step)
            self._comm[step].append(RecvReduce(peer, dst))

    def copy(self, step: int, src: Slice, dst: Slice) -> None:
        if src.count:
            self._grow(step)
            self._local[step].append(Copy(src, dst))

    def reduce(self, step: int, src: Slice, dst: Slice) -> None:
        if src.count:
            self._grow(step)
            self._local[step].append(Reduce(src, dst))

    def empty_message(self, step: int, peer: int, send_buf: str, recv_peer: int, recv_buf: str) -> None:
        """A zero-element send and receive: barriers move knowledge, not data."""
        self._grow(step)
        self._comm[step].append(Send(peer, Slice(send_buf, 0, 0)))
        self._comm[step].append(Recv(recv_peer, Slice(recv_buf, 0, 0)))

    def empty_send(self, step: int, peer: int) -> None:
        """A one-way zero-element message: a tree barrier's "arrived" or "released"."""
        self._grow(step)
        self._comm[step].append(Send(peer, Slice(SCRATCH, 0, 0)))

    def empty_recv(self, step: int, peer: int) -> None:
        self._grow(step)
        self._comm[step].append(Recv(peer, Slice(SCRATCH, 0, 0)))

    def build(self, problem: Problem, rank: int, algorithm: str, scratch: int = 0, **params: object) -> Schedule:
        steps = [tuple(local + comm) for local, comm in zip(self._local, self._comm)]
        while steps and not steps[-1]:
            steps.pop()
        return Schedule(
            collective=problem.collective,
            algorithm=algorithm,
            rank=rank,
            nranks=problem.nranks,
            steps=tuple(steps),
            scratch=scratch,
            params=dict(params),
        )


def check_rank(problem: Problem, rank: int) -> None:
    if not isinstance(rank, int) or isinstance(rank, bool):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}")
    if not 0 <= rank < problem.nranks:
        raise ValueError(f"rank must be in [0, {problem.nranks}), got {rank}")


def check_collective(problem: Problem, *collectives: str) -> None:
    if problem.collective not in collectives:
        raise ValueError(f"problem.collective must be one of {collectives}, got {problem.collective!r}")


def copy_input_to_output(builder: StepBuilder, count: int, out_offset: int = 0, in_offset: int = 0) -> None:
    """Step 0's first local op: after it, in-place algorithms never read "input" again."""
    builder.copy(0, Slice(INPUT, in_offset, count), Slice(OUTPUT, out_offset, count))


def ceil_log2(n: int) -> int:
    """Rounds a doubling tree needs to reach n ranks."""
    return (n - 1).bit_length()


def lowbit(v: int) -> int:
    """Index of the lowest set bit of v > 0: the round in which vrank v joins its parent."""
    return (v & -v).bit_length() - 1


class RootedTree:
    """The binomial tree of gather and scatter, in vranks relative to the root.

    Vrank v = (rank - root) mod n; v's subtree is the contiguous vrank range
    [v, end(v)), so a subtree's blocks are contiguous when laid out in vrank
    order. In the root's buffers (laid out in rank order) such a range is
    contiguous too, except where it wraps past rank n-1 to rank 0: `pieces`
    splits a range there, and both ends of a message to or from the root use
    it, so they agree on the messages.
    """

    def __init__(self, problem: Problem) -> None:
        self.n = problem.nranks
        self.root = problem.root
        self.counts = problem.counts
        self.offsets = problem.offsets()
        vcounts = [problem.counts[self.real(v)] for v in range(self.n)]
        self.voffsets = [0]
        for c in vcounts:
            self.voffsets.append(self.voffsets[-1] + c)
        self.wrap = (self.n - self.root) % self.n

    def vrank(self, rank: int) -> int:
        return (rank - self.root) % self.n

    def real(self, vrank: int) -> int:
        return (vrank + self.root) % self.n

    def end(self, vrank: int) -> int:
        if vrank == 0:
            return self.n
        return min(self.n, vrank + (1 << lowbit(vrank)))

    def span(self, first: int, stop: int) -> int:
        """Elements of the vrank range [first, stop)."""
        return self.voffsets[stop] - self.voffsets[first]

    def pieces(self, first: int, stop: int) -> list[tuple[int, int]]:
        if first < self.wrap < stop:
            return [(first, self.wrap), (self.wrap, stop)]
        return [(first, stop)]


def single_rank(problem: Problem, algorithm: str) -> Schedule:
    """The whole collective on one rank: copy input to output where the output is defined."""
    builder = StepBuilder()
    if problem.collective != "exscan":
        copy_input_to_output(builder, problem.output_count(0))
    return builder.build(problem, 0, algorithm)

"""A step-by-step symbolic trace of one collective's schedules: what every renderer of `explain` draws."""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from typing import Union

from meshcomm.algorithms import DEFAULT, get_schedule
from meshcomm.algorithms.checker import GARBAGE, Simulation, cost
from meshcomm.algorithms.problem import REDUCING, ROOTED, Problem
from meshcomm.algorithms.schedule import (
    BUFFERS,
    OUTPUT,
    Copy,
    Recv,
    RecvReduce,
    Reduce,
    Schedule,
    Send,
    Slice,
)

__all__ = [
    "DTYPES",
    "Cell",
    "Chunk",
    "Cost",
    "LocalOp",
    "Message",
    "State",
    "Step",
    "Trace",
    "build_trace",
    "default_count",
    "make_problem",
    "ranks_label",
]

UNWRITTEN = "-"
# Element sizes for the cost summary's bytes; numpy is not needed to know them.
DTYPES: dict[str, int] = {
    "int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "int32": 4, "float32": 4, "int64": 8, "float64": 8,
}
# The collectives whose Problem has one count for the whole buffer (problem.py).
_SINGLE_COUNT = ("broadcast", "reduce", "all_reduce", "scan", "exscan")
Value = Union[int, None]


@dataclass(frozen=True)
class Chunk:
    """Elements [start, stop) of one buffer, the same on every rank that has them."""

    buf: str
    start: int
    stop: int

    @property
    def span(self) -> str:
        return f"{self.start}:{self.stop}"


@dataclass(frozen=True)
class Cell:
    """One rank's chunk at one moment."""

    label: str  # "0+1+2": those ranks' contributions reduced; "3": rank 3's data; "-": nothing written yet
    ranks: tuple[int, ...]  # every rank whose contribution the chunk holds, for colouring
    final: bool  # an output chunk that already holds the collective's result
    changed: bool  # differs from the state before this step


# rank -> buffer name -> one Cell per chunk of that buffer, None where this rank's buffer is shorter
State = tuple[dict[str, tuple[Union[Cell, None], ...]], ...]


@dataclass(frozen=True)
class Message:
    sender: int
    receiver: int
    src: Slice
    dst: Slice
    reduce: bool  # RecvReduce: the receiver combines it into dst instead of overwriting dst
    carries: str  # label of the data sent, or of the ranks the sender has heard from for empty messages


@dataclass(frozen=True)
class LocalOp:
    rank: int
    op: Union[Copy, Reduce]
    carries: str

    @property
    def reduce(self) -> bool:
        return isinstance(self.op, Reduce)


@dataclass(frozen=True)
class Step:
    index: int  # 0-based, as in the schedules; renderers print index + 1
    local: tuple[LocalOp, ...]  # run first, in listed order
    messages: tuple[Message, ...]  # then all at once
    state: State  # after the step
    heard: tuple[tuple[int, ...], ...]  # per rank: the ranks it knows have arrived (what a barrier computes)


@dataclass(frozen=True)
class Cost:
    """Whole-job totals over every rank's schedule (from `checker.cost`)."""

    steps: int
    messages: int
    elements_sent: int
    elements_reduced: int
    max_rank_sent: int
    max_rank_received: int
    max_rank_reduced: int
    itemsize: int

    @property
    def bytes_sent(self) -> int:
        return self.elements_sent * self.itemsize

    @property
    def bytes_reduced(self) -> int:
        return self.elements_reduced * self.itemsize


@dataclass(frozen=True)
class Trace:
    problem: Problem
    algorithm: str
    schedules: tuple[Schedule, ...]
    chunks: dict[str, tuple[Chunk, ...]]  # only buffers that some rank has
    start: State
    heard_at_start: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    cost: Cost
    dtype: str

    @property
    def nranks(self) -> int:
        return self.problem.nranks

    @property
    def title(self) -> str:
        p = self.problem
        text = f"{p.collective} / {self.algorithm} on {p.nranks} rank{'s' if p.nranks != 1 else ''}"
        if p.collective in ROOTED:
            text += f", root {p.root}"
        if p.counts:
            per = "" if p.collective in _SINGLE_COUNT else " per pair" if p.collective == "all_to_all" else " per rank"
            same = len(set(p.counts)) == 1
            text += f", count {p.counts[0]}{per}" if same else f", counts {list(p.counts)}"
            text += f" ({self.dtype})"
        return text

    @property
    def start_title(self) -> str:
        return "before step 1" if self.steps else "start and end: the schedules have no steps"

    @property
    def legend(self) -> str:
        """How to read a chunk's label, shared by every format."""
        if not self.moves_data:
            return "each rank shows the ranks it knows have arrived; a message carries all its sender has heard"
        what = "0+1+2 = ranks 0, 1 and 2's inputs reduced" if self.reducing else "2 = data from rank 2's input"
        return f"each chunk (elements a:b of a rank's buffer) shows whose data it holds: {what}; " \
               "a..b = ranks a to b; - = not written yet"

    @property
    def moves_data(self) -> bool:
        return bool(self.chunks)

    @property
    def reducing(self) -> bool:
        return self.problem.collective in REDUCING


def ranks_label(ranks: tuple[int, ...] | list[int]) -> str:
    """"0+1+2" for a few ranks; long sets shorten runs of three or more to "a..b" so cells stay narrow."""
    ranks = sorted(ranks)
    plain = "+".join(str(r) for r in ranks)
    if len(plain) <= 8:
        return plain
    parts: list[str] = []
    first = 0
    for index in range(1, len(ranks) + 1):
        if index == len(ranks) or ranks[index] != ranks[index - 1] + 1:
            run = ranks[first:index]
            parts.append(f"{run[0]}..{run[-1]}" if len(run) >= 3 else "+".join(str(r) for r in run))
            first = index
    return "+".join(parts)


def default_count(collective: str, nranks: int) -> int:
    """One element per rank's chunk: enough to see every chunk move, small enough to read."""
    return nranks if collective in _SINGLE_COUNT else 1


def make_problem(collective: str, nranks: int, count: int | None = None, root: int = 0) -> Problem:
    """The Problem `explain` draws; `count` is per buffer, per rank's block, or per pair's block (all_to_all).

    Broadcast, reduce, all_reduce, scan and exscan move one buffer of `count`
    elements; all_gather, gather, reduce_scatter and scatter give every rank a
    block of `count`; all_to_all sends `count` from every rank to every rank;
    barrier moves no data and ignores it.
    """
    if count is None:
        count = default_count(collective, nranks)
    if collective == "barrier":
        counts: tuple[int, ...] = ()
    elif collective == "all_to_all":
        counts = (count,) * (nranks * nranks)
    elif collective in _SINGLE_COUNT:
        counts = (count,)
    else:
        counts = (count,) * nranks
    return Problem(collective, nranks, counts, root)


def build_trace(problem: Problem, algorithm: str | None = None, dtype: str = "float32") -> Trace:
    """Run `problem`'s schedules symbolically step by step and record what every rank holds after each step.

    The schedules are the ones the executor runs (`get_schedule`) and the
    state is the symbolic checker's ("which contributions does this element
    hold"), so a drawing cannot disagree with what the algorithm does; a
    schedule the checker rejects raises its ScheduleError here too.

    Buffers are cut into chunks at every offset that any rank's operations use
    on that buffer, so the chunks are exactly the pieces the algorithm moves
    (a ring's n blocks, a tree's whole buffer, a gather's blocks).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    name = DEFAULT[problem.collective] if algorithm is None else algorithm
    schedules = tuple(get_schedule(problem, rank, name) for rank in range(problem.nranks))
    sim = Simulation(problem, list(schedules), in_place=False)
    snapshots = [_Snapshot.of(sim)]
    for k in range(max((len(s.steps) for s in schedules), default=0)):
        _run_step(sim, schedules, k)
        snapshots.append(_Snapshot.of(sim))
    expected = [sim.expected(rank) for rank in range(problem.nranks)]
    chunks = _chunks(schedules, snapshots[0])
    decoder = _Decoder(sim)
    start = _state(snapshots[0], None, expected, chunks, decoder)
    steps = []
    for k in range(len(snapshots) - 1):
        before, after = snapshots[k], snapshots[k + 1]
        local, mid = _local_ops(schedules, k, before, decoder)
        steps.append(
            Step(
                index=k,
                local=local,
                messages=_messages(schedules, k, mid, before, decoder),
                state=_state(after, before, expected, chunks, decoder),
                heard=tuple(decoder.bits(known) for known in after.knowledge),
            )
        )
    heard_at_start = tuple(decoder.bits(known) for known in snapshots[0].knowledge)
    total = _cost(schedules, DTYPES[dtype])
    return Trace(problem, name, schedules, chunks, start, heard_at_start, tuple(steps), total, dtype)


@dataclass(frozen=True)
class _Snapshot:
    """Every rank's symbolic buffers and knowledge at one moment, copied out of the checker."""

    buffers: list[dict[str, list[Value]]]
    knowledge: list[int]

    @classmethod
    def of(cls, sim: Simulation) -> "_Snapshot":
        buffers = [{buf: list(values) for buf, values in per_rank.items()} for per_rank in sim.buffers]
        return cls(buffers, list(sim.knowledge))


def _run_step(sim: Simulation, schedules: tuple[Schedule, ...], k: int) -> None:
    """Advance the checker by step k alone.

    The checker runs whole schedules; handing it schedules whose earlier steps
    are empty makes it run just step k on the state it already holds, so the
    whole trace costs one pass instead of one run per step.
    """
    sim.schedules = [
        dataclasses.replace(s, steps=((),) * k + (s.steps[k],) if k < len(s.steps) else ()) for s in schedules
    ]
    sim.run()


def _chunks(schedules: tuple[Schedule, ...], start: _Snapshot) -> dict[str, tuple[Chunk, ...]]:
    cuts: dict[str, set[int]] = {buf: {0} for buf in BUFFERS}
    for rank, schedule in enumerate(schedules):
        for buf in BUFFERS:
            cuts[buf].add(len(start.buffers[rank][buf]))
        for step in schedule.steps:
            for op in step:
                for piece in (getattr(op, "src", None), getattr(op, "dst", None)):
                    if piece is not None:
                        cuts[piece.buf].update((piece.offset, piece.end))
    chunks = {}
    for buf in BUFFERS:
        bounds = sorted(cuts[buf])
        if len(bounds) > 1:
            chunks[buf] = tuple(Chunk(buf, a, b) for a, b in zip(bounds, bounds[1:]))
    return chunks


class _Decoder:
    """Turns the checker's contribution bitmasks back into rank numbers."""

    def __init__(self, sim: Simulation) -> None:
        self.base = list(sim.base)
        self.nranks = sim.problem.nranks
        # rank of every input bit, so a value is decoded with one pass over its set bits
        self.owner = [r for r in range(self.nranks) for _ in range(self.base[r + 1] - self.base[r])]
        self._memo: dict[Value, tuple[str, tuple[int, ...]]] = {}

    def ranks(self, value: int) -> tuple[int, ...]:
        found = set()
        while value:
            lowest = value & -value
            found.add(self.owner[lowest.bit_length() - 1])
            value ^= lowest
        return tuple(sorted(found))

    def bits(self, known: int) -> tuple[int, ...]:
        """Knowledge masks have one bit per rank, not per element."""
        return tuple(r for r in range(self.nranks) if known >> r & 1)

    def element(self, value: Value) -> tuple[str, tuple[int, ...]]:
        """Label and ranks of one element; memoised because the same values recur in every step's state."""
        found = self._memo.get(value)
        if found is None:
            if value is GARBAGE:
                found = (UNWRITTEN, ())
            else:
                ranks = self.ranks(value)
                found = (ranks_label(ranks), ranks)
            self._memo[value] = found
        return found

    def label(self, values: list[Value]) -> tuple[str, tuple[int, ...]]:
        """One label for a run of elements; differing elements (rare) are shown joined by "|"."""
        labels: list[str] = []
        everyone: set[int] = set()
        for value in values:
            text, ranks = self.element(value)
            everyone.update(ranks)
            if text not in labels:
                labels.append(text)
        return "|".join(labels) if labels else UNWRITTEN, tuple(sorted(everyone))


def _state(
    snapshot: _Snapshot,
    before: _Snapshot | None,
    expected: list[list[Value]],
    chunks: dict[str, tuple[Chunk, ...]],
    decoder: _Decoder,
) -> State:
    state = []
    for rank, per_rank in enumerate(snapshot.buffers):
        per_buffer: dict[str, tuple[Cell | None, ...]] = {}
        for buf, pieces in chunks.items():
            values = per_rank[buf]
            cells: list[Cell | None] = []
            for chunk in pieces:
                if chunk.stop > len(values):
                    cells.append(None)
                    continue
                now = values[chunk.start : chunk.stop]
                label, ranks = decoder.label(now)
                wanted = expected[rank][chunk.start : chunk.stop] if buf == OUTPUT else []
                final = bool(wanted) and all(w is not GARBAGE and w == v for w, v in zip(wanted, now))
                changed = before is not None and before.buffers[rank][buf][chunk.start : chunk.stop] != now
                cells.append(Cell(label, ranks, final, changed))
            per_buffer[buf] = tuple(cells)
        state.append(per_buffer)
    return tuple(state)


def _local_ops(
    schedules: tuple[Schedule, ...], k: int, before: _Snapshot, decoder: _Decoder
) -> tuple[tuple[LocalOp, ...], list[dict[str, list[Value]]]]:
    """Step k's copies and reductions, and every rank's buffers after them (what the step's sends read)."""
    buffers = [{buf: list(values) for buf, values in rank_buffers.items()} for rank_buffers in before.buffers]
    found = []
    for rank, schedule in enumerate(schedules):
        if k >= len(schedule.steps):
            continue
        for op in schedule.steps[k]:
            if not isinstance(op, (Copy, Reduce)):
                continue
            values = buffers[rank][op.src.buf][op.src.offset : op.src.end]
            found.append(LocalOp(rank, op, decoder.label(values)[0]))
            target = buffers[rank][op.dst.buf]
            if isinstance(op, Copy):
                target[op.dst.offset : op.dst.end] = values
            else:
                # The checker has already proven these defined and disjoint, so a union is the reduction.
                target[op.dst.offset : op.dst.end] = [
                    (t or 0) | (v or 0) for t, v in zip(target[op.dst.offset : op.dst.end], values)
                ]
    return tuple(found), buffers


def _messages(
    schedules: tuple[Schedule, ...], k: int, mid: list[dict[str, list[Value]]], before: _Snapshot, decoder: _Decoder
) -> tuple[Message, ...]:
    """Pair step k's sends with receives, per (sender, receiver) in listed order, as the checker and executor do."""
    sends: dict[tuple[int, int], deque[Send]] = {}
    for rank, schedule in enumerate(schedules):
        if k < len(schedule.steps):
            for op in schedule.steps[k]:
                if isinstance(op, Send):
                    sends.setdefault((rank, op.peer), deque()).append(op)
    found = []
    for rank, schedule in enumerate(schedules):
        if k >= len(schedule.steps):
            continue
        for op in schedule.steps[k]:
            if not isinstance(op, (Recv, RecvReduce)):
                continue
            send = sends[(op.peer, rank)].popleft()
            if send.src.count:
                carries = decoder.label(mid[op.peer][send.src.buf][send.src.offset : send.src.end])[0]
            else:
                carries = "heard " + ranks_label(decoder.bits(before.knowledge[op.peer]))
            found.append(Message(op.peer, rank, send.src, op.dst, isinstance(op, RecvReduce), carries))
    found.sort(key=lambda m: (m.sender, m.receiver))
    return tuple(found)


def _cost(schedules: tuple[Schedule, ...], itemsize: int) -> Cost:
    per_rank = [cost(s) for s in schedules]
    return Cost(
        steps=max((c["steps"] for c in per_rank), default=0),
        messages=sum(c["messages_sent"] for c in per_rank),
        elements_sent=sum(c["elements_sent"] for c in per_rank),
        elements_reduced=sum(c["elements_reduced"] for c in per_rank),
        max_rank_sent=max((c["elements_sent"] for c in per_rank), default=0),
        max_rank_received=max((c["elements_received"] for c in per_rank), default=0),
        max_rank_reduced=max((c["elements_reduced"] for c in per_rank), default=0),
        itemsize=itemsize,
    )

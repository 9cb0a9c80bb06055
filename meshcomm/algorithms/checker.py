"""Symbolic checker: runs all ranks' schedules on sets of contributions and proves the collective's result.

Every buffer element holds a symbolic value: the set of contributions
(src_rank, input_index) reduced into it, or GARBAGE when nothing defined was
ever written there. Inputs start as {(r, i)}; output and scratch start as
garbage. The sets are encoded as int bitmasks (one bit per input element of
the whole job), so unions and overlap tests are single integer operations and
64 ranks with a hundred elements each simulate in milliseconds.

Steps run with exactly the semantics of `schedule.py`, all ranks' step k
together (the executor tags messages with the step): local operations in
listed order, then every send snapshots its source, and each receive is
matched, per (sender, receiver) pair in listed order, with a send of the same
step. Any defect raises ScheduleError naming rank, step, operation and
element; at the end every rank's output is compared with the collective's
definition from `problem.py`.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Union

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import IN_PLACE, Problem
from meshcomm.algorithms.schedule import (
    BUFFERS,
    INPUT,
    OUTPUT,
    SCRATCH,
    Copy,
    Recv,
    RecvReduce,
    Reduce,
    Schedule,
    Send,
    Slice,
)

__all__ = ["GARBAGE", "ScheduleError", "Simulation", "check", "cost", "simulate"]

GARBAGE = None
Value = Union[int, None]
AlgorithmLike = Union[str, Callable[[Problem, int], Schedule]]


class ScheduleError(AssertionError):
    """A schedule that would deadlock, scramble data or compute the wrong result."""


def check(problem: Problem, algorithm: AlgorithmLike, in_place: bool = False) -> None:
    """Raise ScheduleError unless every rank's schedule computes `problem`'s collective.

    `algorithm` is a registry name or a function (problem, rank) -> Schedule.
    With in_place=True, collectives that support it (problem.IN_PLACE) run
    with "input" and "output" naming the same buffer; for the others the flag
    changes nothing.
    """
    simulation = simulate(problem, algorithm, in_place)
    simulation.verify()


def simulate(problem: Problem, algorithm: AlgorithmLike, in_place: bool = False) -> "Simulation":
    """Build and run every rank's schedule; the returned Simulation holds the final symbolic buffers."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
    fn = _resolve(problem, algorithm)
    schedules = [fn(problem, rank) for rank in range(problem.nranks)]
    simulation = Simulation(problem, schedules, in_place)
    simulation.run()
    return simulation


def cost(schedule: Schedule) -> dict[str, int]:
    """One rank's cost summary: steps, messages and elements sent, received, reduced and copied."""
    summary = {
        "steps": len(schedule.steps),
        "messages_sent": 0,
        "messages_received": 0,
        "elements_sent": 0,
        "elements_received": 0,
        "elements_reduced": 0,
        "elements_copied": 0,
        "scratch": schedule.scratch,
    }
    for step in schedule.steps:
        for op in step:
            if isinstance(op, Send):
                summary["messages_sent"] += 1
                summary["elements_sent"] += op.src.count
            elif isinstance(op, (Recv, RecvReduce)):
                summary["messages_received"] += 1
                summary["elements_received"] += op.dst.count
                if isinstance(op, RecvReduce):
                    summary["elements_reduced"] += op.dst.count
            elif isinstance(op, Reduce):
                summary["elements_reduced"] += op.dst.count
            elif isinstance(op, Copy):
                summary["elements_copied"] += op.dst.count
    return summary


def _resolve(problem: Problem, algorithm: AlgorithmLike) -> Callable[[Problem, int], Schedule]:
    if callable(algorithm):
        return algorithm
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a name or a callable, got {type(algorithm).__name__}")
    choices = ALGORITHMS[problem.collective]
    if algorithm not in choices:
        raise ValueError(
            f"unknown {problem.collective} algorithm {algorithm!r}; choose one of: {', '.join(choices)}"
        )
    return choices[algorithm]


class Simulation:
    """All ranks' buffers and knowledge, advanced one global step at a time."""

    def __init__(self, problem: Problem, schedules: list[Schedule], in_place: bool) -> None:
        self.problem = problem
        self.schedules = schedules
        self.aliased = in_place and problem.collective in IN_PLACE
        n = problem.nranks
        self.base = [0]
        for rank in range(n):
            self.base.append(self.base[-1] + problem.input_count(rank))
        self.buffers: list[dict[str, list[Value]]] = []
        for rank, schedule in enumerate(schedules):
            self._check_header(rank, schedule)
            inputs: list[Value] = [1 << (self.base[rank] + i) for i in range(problem.input_count(rank))]
            output = inputs if self.aliased else [GARBAGE] * problem.output_count(rank)
            self.buffers.append({INPUT: inputs, OUTPUT: output, SCRATCH: [GARBAGE] * schedule.scratch})
        self.knowledge = [1 << rank for rank in range(n)]
        self.final_knowledge = [1 << rank if not s.steps else 0 for rank, s in enumerate(schedules)]
        self.name = f"{problem.collective}/{schedules[0].algorithm if schedules else '?'}"

    def _check_header(self, rank: int, schedule: object) -> None:
        if not isinstance(schedule, Schedule):
            raise ScheduleError(f"rank {rank}: algorithm returned {type(schedule).__name__}, not a Schedule")
        p = self.problem
        if (schedule.collective, schedule.rank, schedule.nranks) != (p.collective, rank, p.nranks):
            raise ScheduleError(
                f"rank {rank}: schedule is for {schedule.collective} rank {schedule.rank} of {schedule.nranks}, "
                f"expected {p.collective} rank {rank} of {p.nranks}"
            )
        if schedule.scratch < 0:
            raise ScheduleError(f"rank {rank}: scratch must be >= 0, got {schedule.scratch}")

    def _where(self, rank: int, step: int, op: object) -> str:
        p = self.problem
        return f"{self.name} on {p.nranks} ranks {p.counts} root {p.root}: rank {rank} step {step} op '{op}'"

    def _describe(self, value: Value) -> str:
        if value is GARBAGE:
            return "garbage"
        pairs = []
        for rank in range(self.problem.nranks):
            low, high = self.base[rank], self.base[rank + 1]
            bits = (value >> low) & ((1 << (high - low)) - 1)
            while bits:
                lowest = bits & -bits
                pairs.append((rank, lowest.bit_length() - 1))
                bits ^= lowest
        text = ", ".join(f"({r}, {i})" for r, i in pairs[:8])
        return "{" + text + (", ..." if len(pairs) > 8 else "") + "}"

    def _region(self, rank: int, step: int, op: object, piece: Slice) -> tuple[str, int, int]:
        """Bounds-check a slice; returns (buffer identity, start, stop) for overlap tests."""
        if not isinstance(piece, Slice) or piece.buf not in BUFFERS:
            raise ScheduleError(f"{self._where(rank, step, op)}: {piece!r} is not a Slice of {BUFFERS}")
        size = len(self.buffers[rank][piece.buf])
        if piece.end > size:
            raise ScheduleError(
                f"{self._where(rank, step, op)}: {piece} is out of bounds, {piece.buf} holds {size} elements"
            )
        buf = OUTPUT if self.aliased and piece.buf == INPUT else piece.buf
        return buf, piece.offset, piece.end

    def _read(self, rank: int, step: int, op: object, piece: Slice) -> list[Value]:
        self._region(rank, step, op, piece)
        values = self.buffers[rank][piece.buf][piece.offset : piece.end]
        for index, value in enumerate(values):
            if value is GARBAGE:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: reads garbage at element {piece.buf}[{piece.offset + index}]"
                )
        return values

    def _write(self, rank: int, step: int, op: object, piece: Slice, values: list[Value], combine: bool) -> None:
        self._region(rank, step, op, piece)
        if piece.buf == INPUT and not self.aliased:
            raise ScheduleError(f"{self._where(rank, step, op)}: writes the input buffer")
        target = self.buffers[rank][piece.buf]
        if not combine:
            target[piece.offset : piece.end] = values
            return
        for index, incoming in enumerate(values):
            element = piece.offset + index
            current = target[element]
            if current is GARBAGE:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: combines into garbage at element {piece.buf}[{element}]"
                )
            if current & incoming:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: counts {self._describe(current & incoming)} twice "
                    f"at element {piece.buf}[{element}]"
                )
            target[element] = current | incoming

    def run(self) -> None:
        n = self.problem.nranks
        nsteps = max((len(s.steps) for s in self.schedules), default=0)
        for step in range(nsteps):
            active = [rank for rank in range(n) if step < len(self.schedules[rank].steps)]
            for rank in active:
                for op in self.schedules[rank].steps[step]:
                    if isinstance(op, Copy):
                        self._write(rank, step, op, op.dst, self._read(rank, step, op, op.src), combine=False)
                    elif isinstance(op, Reduce):
                        self._write(rank, step, op, op.dst, self._read(rank, step, op, op.src), combine=True)
                    elif not isinstance(op, (Send, Recv, RecvReduce)):
                        raise ScheduleError(f"{self._where(rank, step, op)}: unknown operation {op!r}")
            in_flight: dict[tuple[int, int], deque] = {}
            for rank in active:
                self._post(rank, step, in_flight)
            for rank in active:
                self._receive(rank, step, in_flight)
            for (sender, receiver), queue in in_flight.items():
                if queue:
                    op = queue[0][0]
                    raise ScheduleError(
                        f"{self._where(sender, step, op)}: rank {receiver} posts no matching receive in step {step}"
                    )
            for rank in active:
                if step == len(self.schedules[rank].steps) - 1:
                    self.final_knowledge[rank] = self.knowledge[rank]

    def _post(self, rank: int, step: int, in_flight: dict[tuple[int, int], deque]) -> None:
        """Snapshot this rank's sends and check its receives against each other and its sends."""
        n = self.problem.nranks
        sources: list[tuple[str, int, int, object]] = []
        destinations: list[tuple[str, int, int, object]] = []
        for op in self.schedules[rank].steps[step]:
            if not isinstance(op, (Send, Recv, RecvReduce)):
                continue
            if not isinstance(op.peer, int) or not 0 <= op.peer < n or op.peer == rank:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: peer must be another rank in [0, {n}), got {op.peer!r}"
                )
            if isinstance(op, Send):
                values = self._read(rank, step, op, op.src)
                sources.append((*self._region(rank, step, op, op.src), op))
                in_flight.setdefault((rank, op.peer), deque()).append((op, values, self.knowledge[rank]))
            else:
                destinations.append((*self._region(rank, step, op, op.dst), op))
        for index, (buf, start, stop, op) in enumerate(destinations):
            for other_buf, other_start, other_stop, other in destinations[index + 1 :] + sources:
                if buf == other_buf and start < other_stop and other_start < stop:
                    element = max(start, other_start)
                    raise ScheduleError(
                        f"{self._where(rank, step, op)}: receive destination overlaps '{other}' "
                        f"at element {buf}[{element}]"
                    )

    def _receive(self, rank: int, step: int, in_flight: dict[tuple[int, int], deque]) -> None:
        for op in self.schedules[rank].steps[step]:
            if not isinstance(op, (Recv, RecvReduce)):
                continue
            queue = in_flight.get((op.peer, rank))
            if not queue:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: rank {op.peer} sends no matching message in step {step}"
                )
            send, values, knowledge = queue.popleft()
            if len(values) != op.dst.count:
                raise ScheduleError(
                    f"{self._where(rank, step, op)}: matched '{send}' of rank {op.peer}, "
                    f"{len(values)} elements sent but {op.dst.count} expected"
                )
            self._write(rank, step, op, op.dst, values, combine=isinstance(op, RecvReduce))
            self.knowledge[rank] |= knowledge

    def expected(self, rank: int) -> list[Value]:
        """The collective's definition for rank's output; GARBAGE marks elements left unconstrained."""
        p, n = self.problem, self.problem.nranks
        c = p.collective
        everyone = range(n)

        # Reducing collectives give every rank the same input count, so the
        # contributions of ranks [0, k) to one index form a strided bit pattern.
        stride = p.input_count(0)
        prefix = [0]
        for r in everyone:
            prefix.append(prefix[-1] | 1 << (r * stride))

        def element(ranks: range, index: int) -> int:
            return (prefix[ranks.stop] ^ prefix[ranks.start]) << index

        size = p.output_count(rank)
        if c == "broadcast":
            return [element(range(p.root, p.root + 1), i) for i in range(size)]
        if c in ("reduce", "all_reduce"):
            if c == "reduce" and rank != p.root:
                return [GARBAGE] * size
            return [element(everyone, i) for i in range(size)]
        if c == "scan":
            return [element(range(rank + 1), i) for i in range(size)]
        if c == "exscan":
            if rank == 0:
                return [GARBAGE] * size
            return [element(range(rank), i) for i in range(size)]
        if c in ("all_gather", "gather"):
            return [1 << (self.base[r] + i) for r in everyone for i in range(p.counts[r])]
        offsets = p.offsets()
        if c == "reduce_scatter":
            return [element(everyone, offsets[rank] + i) for i in range(size)]
        if c == "scatter":
            return [1 << (self.base[p.root] + offsets[rank] + i) for i in range(size)]
        if c == "all_to_all":
            values = []
            for source in everyone:
                row_offset = sum(p.matrix(source, j) for j in range(rank))
                values.extend(1 << (self.base[source] + row_offset + i) for i in range(p.matrix(source, rank)))
            return values
        return []

    def verify(self) -> None:
        """Compare every rank's output (barrier: knowledge) with the collective's definition."""
        p = self.problem
        for rank in range(p.nranks):
            if p.collective == "barrier":
                missing = [r for r in range(p.nranks) if not self.final_knowledge[rank] >> r & 1]
                if missing:
                    raise ScheduleError(
                        f"{self.name} on {p.nranks} ranks: rank {rank} finishes before hearing from ranks {missing}"
                    )
                continue
            actual = self.buffers[rank][OUTPUT]
            for index, (want, got) in enumerate(zip(self.expected(rank), actual)):
                if want is not GARBAGE and want != got:
                    raise ScheduleError(
                        f"{self.name} on {p.nranks} ranks {p.counts} root {p.root}: rank {rank} output[{index}] "
                        f"holds {self._describe(got)}, expected {self._describe(want)}"
                    )


"""The checker rejects every single-operation mutation of correct schedules, with a precise message."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.checker import ScheduleError, check
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

Algorithm = Callable[[Problem, int], Schedule]

SUBJECTS = [
    (Problem("all_reduce", 4, (10,)), "ring"),
    (Problem("all_reduce", 5, (7,)), "recursive_doubling"),
    (Problem("broadcast", 5, (6,), root=2), "binomial"),
    (Problem("broadcast", 4, (5,), root=1), "chain"),
    (Problem("reduce", 6, (3,), root=4), "binomial"),
    (Problem("all_gather", 4, (2, 0, 3, 1)), "ring"),
    (Problem("reduce_scatter", 4, (2, 1, 3, 2)), "ring"),
    (Problem("gather", 6, (1, 2, 0, 3, 1, 2), root=3), "binomial"),
    (Problem("gather", 4, (1, 2, 1, 3), root=1), "linear"),
    (Problem("scatter", 6, (1, 2, 1, 3, 1, 2), root=3), "binomial"),
    (Problem("scatter", 4, (2, 2, 1, 3), root=2), "linear"),
    (Problem("all_to_all", 3, (1, 2, 1, 2, 1, 1, 1, 3, 2)), "pairwise"),
    (Problem("barrier", 5, ()), "dissemination"),
    (Problem("scan", 5, (3,)), "linear"),
    (Problem("scan", 6, (3,)), "recursive_doubling"),
    (Problem("exscan", 5, (3,)), "linear"),
    (Problem("exscan", 6, (3,)), "recursive_doubling"),
    (Problem("broadcast", 5, (7,), root=3), "scatter_ring"),
    (Problem("broadcast", 6, (9,), root=4), "scatter_recursive_doubling"),
    (Problem("reduce", 6, (9,), root=3), "rabenseifner"),
    (Problem("all_reduce", 6, (9,)), "rabenseifner"),
    (Problem("all_reduce", 5, (4,)), "binomial"),
    (Problem("all_reduce", 5, (8,)), "double_binary_tree"),
    (Problem("all_reduce", 6, (8,)), "double_binary_tree"),
    (Problem("all_gather", 6, (2, 0, 3, 1, 2, 1)), "recursive_doubling"),
    (Problem("all_gather", 5, (2, 1, 3, 0, 2)), "bruck"),
    (Problem("reduce_scatter", 6, (2, 1, 3, 0, 2, 1)), "recursive_halving"),
    (Problem("reduce_scatter", 4, (2, 1, 3, 2)), "pairwise"),
    (Problem("all_to_all", 5, tuple((i * 7 + 3) % 4 for i in range(25))), "bruck"),
    (Problem("all_to_all", 3, (1, 2, 1, 2, 1, 1, 1, 3, 2)), "scattered"),
    (Problem("barrier", 6, ()), "tree"),
]


def _slice_of(op: Op) -> Slice:
    return op.src if isinstance(op, Send) else op.dst


def _with_slice(op: Op, piece: Slice) -> Op:
    if isinstance(op, Send):
        return dataclasses.replace(op, src=piece)
    if isinstance(op, (Copy, Reduce)):
        return dataclasses.replace(op, src=dataclasses.replace(op.src, offset=op.src.offset + 1))
    return dataclasses.replace(op, dst=piece)


def mutations(op: Op, nranks: int) -> Iterator[tuple[str, Op | None]]:
    """(description, replacement) pairs for one operation; None drops it."""
    yield "drop", None
    if isinstance(op, (Send, Recv, RecvReduce)):
        yield "change peer", dataclasses.replace(op, peer=(op.peer + 1) % nranks)
    piece = _slice_of(op)
    yield "shift offset", _with_slice(op, dataclasses.replace(piece, offset=piece.offset + 1))
    if isinstance(op, RecvReduce):
        yield "recv-reduce to recv", Recv(op.peer, op.dst)


def mutated(fn: Algorithm, rank: int, step: int, index: int, replacement: Op | None) -> Algorithm:
    def algorithm(problem: Problem, r: int) -> Schedule:
        schedule = fn(problem, r)
        if r != rank:
            return schedule
        steps = list(schedule.steps)
        ops = list(steps[step])
        if replacement is None:
            del ops[index]
        else:
            ops[index] = replacement
        steps[step] = tuple(ops)
        return dataclasses.replace(schedule, steps=tuple(steps))

    return algorithm


@pytest.mark.parametrize(("problem", "name"), SUBJECTS, ids=[f"{p.collective}/{a}" for p, a in SUBJECTS])
def test_checker_rejects_every_single_op_mutation(problem: Problem, name: str) -> None:
    fn = ALGORITHMS[problem.collective][name]
    check(problem, fn)
    tried = 0
    for rank in range(problem.nranks):
        for step, ops in enumerate(fn(problem, rank).steps):
            for index, op in enumerate(ops):
                for what, replacement in mutations(op, problem.nranks):
                    if replacement == op:
                        continue
                    tried += 1
                    with pytest.raises(ScheduleError):
                        check(problem, mutated(fn, rank, step, index, replacement))
                        pytest.fail(f"{what} of '{op}' at rank {rank} step {step} went unnoticed")
    assert tried > 0


def _schedule(problem: Problem, rank: int, *steps: tuple[Op, ...], scratch: int = 0) -> Schedule:
    return Schedule(problem.collective, "handmade", rank, problem.nranks, tuple(steps), scratch)


def _handmade(per_rank: dict[int, list[tuple[Op, ...]]], scratch: int = 0) -> Algorithm:
    return lambda problem, rank: _schedule(problem, rank, *per_rank.get(rank, []), scratch=scratch)


PAIR = Problem("all_reduce", 2, (2,))
COPY = Copy(Slice(INPUT, 0, 2), Slice(OUTPUT, 0, 2))


def test_checker_accepts_a_handmade_two_rank_all_reduce() -> None:
    exchange = {
        r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 2)), Recv(1 - r, Slice(SCRATCH, 0, 2))),
            (Reduce(Slice(SCRATCH, 0, 2), Slice(OUTPUT, 0, 2)),)]
        for r in range(2)
    }
    check(PAIR, _handmade(exchange, scratch=2))


@pytest.mark.parametrize(
    ("schedules", "scratch", "message"),
    [
        ({r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 2)), RecvReduce(1 - r, Slice(OUTPUT, 0, 2)))] for r in range(2)},
         0, "receive destination overlaps 'send output[0:2] -> "),
        ({r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 1)), Recv(1 - r, Slice(SCRATCH, 0, 2)))] for r in range(2)},
         2, "1 elements sent but 2 expected"),
        ({r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 2)), Recv(1 - r, Slice(SCRATCH, 1, 2)))] for r in range(2)},
         2, "scratch[1:3] is out of bounds, scratch holds 2 elements"),
        ({r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 2)), Recv(1 - r, Slice(INPUT, 0, 2)))] for r in range(2)},
         0, "writes the input buffer"),
        ({r: [(COPY, Send(1 - r, Slice(OUTPUT, 0, 2)), Recv(1 - r, Slice(SCRATCH, 0, 2))),
              (Reduce(Slice(SCRATCH, 0, 2), Slice(OUTPUT, 0, 2)), Reduce(Slice(SCRATCH, 0, 2), Slice(OUTPUT, 0, 2)))]
          for r in range(2)},
         2, "counts {(1, 0)} twice at element output[0]"),
        ({r: [(Send(1 - r, Slice(INPUT, 0, 2)), RecvReduce(1 - r, Slice(OUTPUT, 0, 2)))] for r in range(2)},
         0, "combines into garbage at element output[0]"),
        ({0: [(COPY, Send(1, Slice(OUTPUT, 0, 2)))], 1: [(COPY,)]}, 0, "rank 1 posts no matching receive in step 0"),
        ({0: [(COPY,), (Send(1, Slice(OUTPUT, 0, 2)),)], 1: [(COPY, RecvReduce(0, Slice(OUTPUT, 0, 2)))]},
         0, "rank 0 sends no matching message in step 0"),
        ({0: [(COPY, Send(0, Slice(OUTPUT, 0, 2)))]}, 0, "peer must be another rank in [0, 2), got 0"),
        ({0: [(Send(1, Slice(SCRATCH, 0, 2)),)]}, 2, "reads garbage at element scratch[0]"),
        ({r: [(COPY,)] for r in range(2)}, 0, "rank 0 output[0] holds {(0, 0)}, expected {(0, 0), (1, 0)}"),
    ],
    ids=["recv-overlaps-send", "count-mismatch", "out-of-bounds", "input-written", "double-count",
         "garbage-combined", "unmatched-send", "receive-in-wrong-step", "send-to-self", "garbage-sent",
         "wrong-result"],
)
def test_checker_names_the_defect(schedules: dict, scratch: int, message: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        check(PAIR, _handmade(schedules, scratch=scratch))
    assert message in str(raised.value)


def test_checker_names_rank_step_and_op() -> None:
    schedules = {0: [(COPY, Send(1, Slice(OUTPUT, 0, 2)))], 1: [(COPY,)]}
    with pytest.raises(ScheduleError) as raised:
        check(PAIR, _handmade(schedules))
    assert "rank 0 step 0 op 'send output[0:2] -> 1'" in str(raised.value)


def test_in_place_mode_catches_reading_input_after_output_was_written() -> None:
    problem = Problem("broadcast", 2, (2,), root=0)
    check(problem, broadcast_reading_input_late)
    with pytest.raises(ScheduleError, match=r"rank 0 output\[0\] holds \{\(1, 0\)\}"):
        check(problem, broadcast_reading_input_late, in_place=True)


def broadcast_reading_input_late(problem: Problem, rank: int) -> Schedule:
    """The root overwrites its output, then reads input again: right only when the two differ."""
    whole_input, whole_output = Slice(INPUT, 0, 2), Slice(OUTPUT, 0, 2)
    if rank == 0:
        return _schedule(
            problem, 0, (Copy(whole_input, whole_output),), (Recv(1, whole_output),),
            (Copy(whole_input, whole_output), Send(1, whole_input)),
        )
    return _schedule(problem, 1, (), (Send(0, whole_input),), (Recv(0, whole_output),))


def test_barrier_missing_a_round_leaves_a_rank_uninformed() -> None:
    fn = ALGORITHMS["barrier"]["dissemination"]
    problem = Problem("barrier", 8, ())

    def short(p: Problem, rank: int) -> Schedule:
        schedule = fn(p, rank)
        return dataclasses.replace(schedule, steps=schedule.steps[:-1])

    with pytest.raises(ScheduleError, match="finishes before hearing from ranks"):
        check(problem, short)

"""Direct: every rank hands what the others need straight to them, in one step.

The one-synchronisation form of each collective: in step 0 every rank sends
its contribution (or the part a peer needs) to each peer that needs it and
receives theirs; a reduction then combines all contributions in rank order
(rank 0's first), so every rank computes bit-identical results whatever
order the messages came in. On a group whose ranks all share a host, and
messages small enough, the group runs these on its board
(meshcomm/executor/board.py): each rank publishes once in shared memory and
the others read, one synchronisation instead of n - 1 messages each way.

Cost: 1 communication step for every collective (2 steps where a reduction
follows); the latency is one message's, the bytes are the most any
algorithm sends (each rank gets every contribution it needs whole), so
these are for small messages.

- all_reduce: send the input to every peer; gather all n inputs in scratch,
  then reduce them in rank order into the output. Cost: 1 step + 1 local
  step; each rank sends and receives (n - 1) m elements and reduces
  (n - 1) m; scratch n m.
- reduce: the same towards the root only; the root receives (n - 1) m.
- broadcast: the root sends its buffer to every rank; (n - 1) m leave the root.
- all_gather: each rank sends its block to every peer, receiving into the output.
- reduce_scatter: each rank sends block j of its input to rank j; rank j
  reduces the n blocks in rank order. Each rank sends T - counts[r], receives
  (n - 1) counts[r], reduces (n - 1) counts[r].
- all_to_all: every exchange at once (the scattered exchange without a throttle).
- barrier: an empty message from every rank to every rank: 1 step, n (n - 1) messages.
"""

from __future__ import annotations

from meshcomm.algorithms._build import StepBuilder, check_collective, check_rank, copy_input_to_output, single_rank
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice, prefix_offsets


def _peers(rank: int, n: int) -> list[int]:
    """The other ranks, starting after `rank`, so that not every rank sends to rank 0 first."""
    return [(rank + s) % n for s in range(1, n)]


def _start(problem: Problem, rank: int, *collectives: str) -> Schedule | None:
    check_collective(problem, *collectives)
    check_rank(problem, rank)
    return single_rank(problem, "direct") if problem.nranks == 1 else None


def _reduce_in_rank_order(builder: StepBuilder, n: int, count: int, out_offset: int = 0) -> None:
    """Step 1: output = scratch block 0, then each further block combined in, in rank order."""
    builder.copy(1, Slice(SCRATCH, 0, count), Slice(OUTPUT, out_offset, count))
    for peer in range(1, n):
        builder.reduce(1, Slice(SCRATCH, peer * count, count), Slice(OUTPUT, out_offset, count))


def all_reduce(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "all_reduce")
    if single is not None:
        return single
    n, m = problem.nranks, problem.count
    builder = StepBuilder()
    builder.copy(0, Slice(INPUT, 0, m), Slice(SCRATCH, rank * m, m))
    for peer in _peers(rank, n):
        builder.send(0, peer, Slice(SCRATCH, rank * m, m))  # not from input: in place, it is read once
        builder.recv(0, peer, Slice(SCRATCH, peer * m, m))
    _reduce_in_rank_order(builder, n, m)
    return builder.build(problem, rank, "direct", scratch=n * m)


def reduce(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "reduce")
    if single is not None:
        return single
    n, m, root = problem.nranks, problem.count, problem.root
    builder = StepBuilder()
    if rank != root:
        builder.send(0, root, Slice(INPUT, 0, m))
        return builder.build(problem, rank, "direct")
    builder.copy(0, Slice(INPUT, 0, m), Slice(SCRATCH, rank * m, m))
    for peer in _peers(rank, n):
        builder.recv(0, peer, Slice(SCRATCH, peer * m, m))
    _reduce_in_rank_order(builder, n, m)
    return builder.build(problem, rank, "direct", scratch=n * m)


def broadcast(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "broadcast")
    if single is not None:
        return single
    m, root = problem.count, problem.root
    builder = StepBuilder()
    if rank == root:
        copy_input_to_output(builder, m)
        for peer in _peers(rank, problem.nranks):
            builder.send(0, peer, Slice(OUTPUT, 0, m))
    else:
        builder.recv(0, root, Slice(OUTPUT, 0, m))
    return builder.build(problem, rank, "direct")


def all_gather(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "all_gather")
    if single is not None:
        return single
    counts, offsets = problem.counts, problem.offsets()
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], out_offset=offsets[rank])
    for peer in _peers(rank, problem.nranks):
        builder.send(0, peer, Slice(INPUT, 0, counts[rank]))
        builder.recv(0, peer, Slice(OUTPUT, offsets[peer], counts[peer]))
    return builder.build(problem, rank, "direct")


def reduce_scatter(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "reduce_scatter")
    if single is not None:
        return single
    n, counts, offsets = problem.nranks, problem.counts, problem.offsets()
    mine = counts[rank]
    builder = StepBuilder()
    builder.copy(0, Slice(INPUT, offsets[rank], mine), Slice(SCRATCH, rank * mine, mine))
    for peer in _peers(rank, n):
        builder.send(0, peer, Slice(INPUT, offsets[peer], counts[peer]))
        builder.recv(0, peer, Slice(SCRATCH, peer * mine, mine))
    _reduce_in_rank_order(builder, n, mine)
    return builder.build(problem, rank, "direct", scratch=n * mine)


def all_to_all(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "all_to_all")
    if single is not None:
        return single
    n = problem.nranks
    row = prefix_offsets([problem.matrix(rank, j) for j in range(n)])
    column = prefix_offsets([problem.matrix(i, rank) for i in range(n)])
    builder = StepBuilder()
    own = problem.matrix(rank, rank)
    builder.copy(0, Slice(INPUT, row[rank], own), Slice(OUTPUT, column[rank], own))
    for peer in _peers(rank, n):
        builder.send(0, peer, Slice(INPUT, row[peer], problem.matrix(rank, peer)))
        builder.recv(0, peer, Slice(OUTPUT, column[peer], problem.matrix(peer, rank)))
    return builder.build(problem, rank, "direct")


def barrier(problem: Problem, rank: int) -> Schedule:
    single = _start(problem, rank, "barrier")
    if single is not None:
        return single
    builder = StepBuilder()
    for peer in _peers(rank, problem.nranks):
        builder.empty_send(0, peer)
        builder.empty_recv(0, peer)
    return builder.build(problem, rank, "direct")

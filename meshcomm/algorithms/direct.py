"""Direct: every rank hands what the others need straight to them, in one step.

The one-synchronisation form of each collective: in step 0 every rank sends
its contribution (or the part a peer needs) to each peer that needs it and
receives theirs; a reduction then combines all contributions in rank order
(rank 0's first), so every rank computes bit-identical results whatever
order the messages came in. On a group whose ranks all share a host the
group runs these on its board (meshcomm/board/run.py): each rank
publishes once in shared memory (in a slot, or by reference when larger
and the ranks can reach each other's memory) and the others read, one or
two synchronisations instead of n - 1 messages each way.

Cost: 1 communication step for every collective (2 steps where a reduction
follows); the latency is one message's, the bytes are the most any
algorithm sends (each rank gets every contribution it needs whole), so as
messages these are for small calls.
"""

from __future__ import annotations

from dataclasses import replace

from meshcomm.algorithms import gather as gathers
from meshcomm.algorithms import scatter as scatters
from meshcomm.algorithms._build import StepBuilder, check_collective, check_rank, copy_input_to_output, single_rank
from meshcomm.algorithms.all_to_all import exchanges_in_steps
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice, block_bounds


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
    """Direct all-reduce: every rank sends its input to every peer, then reduces all n inputs in rank order.

    The inputs are gathered in scratch (n m elements) and combined rank 0's
    first, so every rank computes the same bits. Cost: 1 step plus 1 local
    step of reduction (2 steps); each rank sends and receives (n - 1) m
    elements and reduces (n - 1) m. On one host, small calls run on the
    group's board: one synchronisation for the whole call.
    """
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


def two_shot(problem: Problem, rank: int) -> Schedule:
    """Two-shot all-reduce: a direct reduce-scatter, then a direct all-gather of the reduced blocks.

    The buffer is cut into n blocks (block_bounds). Step 0: rank r sends
    block j of its input to rank j and receives block r of every peer's
    input into scratch; step 1: it reduces them in rank order into block r of
    its output; step 2: it sends that block to every peer and receives theirs
    into its output. Each block is reduced by one rank, so every rank holds
    the same bits. As messages it works in its output from a first copy of
    the input (so input and output may be the same memory).
    (The name is that of the custom all-reduce kernels that GPU inference
    engines run within a node, against the one-shot `direct`.)

    Cost: 2 communication steps and 1 local step (3 steps); each rank sends and
    receives 2 (n - 1) m / n elements and reduces (n - 1) m / n, as the ring
    does, in 2 (n - 1) messages at once instead of one after another; scratch
    m (n blocks of m / n). On one host whose ranks can read and write each
    other's memory it runs on the group's board (meshcomm/board/run.py):
    each rank reads its block from every peer's input, reduces it and writes
    it into every peer's output, two synchronisations for the whole call.
    """
    single = _start(problem, rank, "all_reduce")
    if single is not None:
        return single
    n = problem.nranks
    bounds = block_bounds(problem.count, n)
    lo, mine = bounds[rank], bounds[rank + 1] - bounds[rank]
    builder = StepBuilder()
    copy_input_to_output(builder, problem.count)  # in place, the input is read once
    builder.copy(0, Slice(OUTPUT, lo, mine), Slice(SCRATCH, rank * mine, mine))
    for peer in _peers(rank, n):
        builder.send(0, peer, Slice(OUTPUT, bounds[peer], bounds[peer + 1] - bounds[peer]))
        builder.recv(0, peer, Slice(SCRATCH, peer * mine, mine))
    _reduce_in_rank_order(builder, n, mine, out_offset=lo)
    for peer in _peers(rank, n):
        builder.send(2, peer, Slice(OUTPUT, lo, mine))
        builder.recv(2, peer, Slice(OUTPUT, bounds[peer], bounds[peer + 1] - bounds[peer]))
    return builder.build(problem, rank, "two_shot", scratch=n * mine)


def reduce(problem: Problem, rank: int) -> Schedule:
    """Direct reduce: every rank sends its input to the root, which reduces all n in rank order.

    Cost: 1 step plus the root's local reduction (2 steps); the root
    receives (n - 1) m elements in n - 1 messages and reduces (n - 1) m;
    scratch n m at the root.
    """
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
    """Direct broadcast: the root sends its buffer to every other rank at once.

    Cost: 1 step (the fewest steps possible); (n - 1) m elements leave the root in n - 1 messages,
    each other rank receives m; nothing is reduced.
    """
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
    """Direct all-gather: every rank sends its block to every peer, receiving theirs into the output.

    Cost: 1 step (the fewest steps possible); rank r sends (n - 1) counts[r] elements and receives
    T - counts[r]; nothing is reduced.
    """
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
    """Direct reduce-scatter: rank r sends block j of its input to rank j; each reduces its n blocks in rank order.

    Cost: 1 step plus 1 local step of reduction (2 steps); rank r sends
    T - counts[r] elements, receives and reduces (n - 1) counts[r]; scratch
    n counts[r].
    """
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
    """Direct all-to-all: every exchange at once (the scattered exchange without a throttle).

    Cost: 1 step (the fewest steps possible); rank r sends its row minus its own block and receives its
    column minus its own block, in n - 1 messages each way; nothing is reduced.
    """
    check_collective(problem, "all_to_all")
    check_rank(problem, rank)
    return exchanges_in_steps(problem, rank, max(problem.nranks - 1, 1), "direct")


def gather(problem: Problem, rank: int) -> Schedule:
    """Direct gather: every rank sends its block to the root, which receives each straight into its output.

    As messages, the linear gather's schedule (algorithms/gather.py). On one host it runs on the board.

    Cost: 1 step (the fewest steps possible); the root receives T - counts[root] elements in n - 1 messages;
    nothing is reduced.
    """
    return replace(gathers.linear(problem, rank), algorithm="direct")


def scatter(problem: Problem, rank: int) -> Schedule:
    """Direct scatter: the root sends every rank its block at once.

    As messages, the linear scatter's schedule (algorithms/scatter.py). On one host it runs on the board.

    Cost: 1 step (the fewest steps possible); the root sends T - counts[root] elements in n - 1 messages;
    nothing is reduced.
    """
    return replace(scatters.linear(problem, rank), algorithm="direct")


def barrier(problem: Problem, rank: int) -> Schedule:
    """Direct barrier: an empty message from every rank to every other rank.

    Cost: 1 step (the fewest steps possible); n - 1 empty messages sent and received per rank,
    n (n - 1) in all (on one host: one synchronisation on the board).
    """
    single = _start(problem, rank, "barrier")
    if single is not None:
        return single
    builder = StepBuilder()
    for peer in _peers(rank, problem.nranks):
        builder.empty_send(0, peer)
        builder.empty_recv(0, peer)
    return builder.build(problem, rank, "direct")

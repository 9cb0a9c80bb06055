"""All-gather: every rank's output holds all ranks' inputs concatenated in rank order.

Ring. Rank r's contribution is block r of the output (counts[r] elements at
offset offsets[r]; blocks may differ in size and may be empty, in which case
no message carries them). Each rank first copies its input into its own
block. Then in steps s = 0 .. n-2 rank r sends block (r - s) mod n to rank
r + 1 and receives block (r - s - 1) mod n from rank r - 1: every block
travels once around the ring, one hop per step.

Cost for total T = sum(counts): n - 1 steps; rank r sends T - counts[r + 1]
elements and receives T - counts[r]; nothing is reduced.

Recursive doubling and Bruck, both logarithmic in steps, are described with
their costs where they are defined below.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    check_collective,
    check_rank,
    ceil_log2,
    copy_input_to_output,
    single_rank,
)
from meshcomm.algorithms._fold import Fold
from meshcomm.algorithms._fold import recursive_doubling as gather_rounds
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, Schedule, Slice


def ring(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "all_gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "ring")
    n, counts = problem.nranks, problem.counts
    offsets = problem.offsets()
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], out_offset=offsets[rank])

    def block(index: int) -> Slice:
        index %= n
        return Slice(OUTPUT, offsets[index], counts[index])

    right, left = (rank + 1) % n, (rank - 1) % n
    for s in range(n - 1):
        builder.send(s, right, block(rank - s))
        builder.recv(s, left, block(rank - s - 1))
    return builder.build(problem, rank, "ring")


def recursive_doubling(problem: Problem, rank: int) -> Schedule:
    """Recursive doubling, with a fold for sizes that are not a power of two.

    Every rank copies its input into its own block of the output. With p the
    largest power of two <= n and rem = n - p, step 0 folds (`_fold.py`): rank
    2i + 1 (i < rem) sends its block to rank 2i. The p participants then
    double: in round k vrank v holds the blocks of its aligned group of 2**k
    vranks, which is one contiguous range of the output because a vrank
    stands for a contiguous range of ranks, and swaps it with vrank v xor 2**k.
    A last step hands every folded rank everything but its own block.

    Cost for total T = sum(counts): log2 p steps, + 2 when n is not a power of
    two; a participant sends and receives T minus the blocks it already holds
    (about T (p - 1) / p), in one message per round; a folded rank sends its
    block and receives T minus it. Nothing is reduced.
    """
    check_collective(problem, "all_gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "recursive_doubling")
    counts = problem.counts
    offsets = problem.offsets()
    fold = Fold(problem.nranks)
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], out_offset=offsets[rank])
    first = 1 if fold.rem else 0
    last = first + fold.rounds
    vrank = fold.vrank(rank)

    def all_but(r: int) -> list[Slice]:
        """The output without rank r's block: the part a folded rank r gets at the end."""
        return [Slice(OUTPUT, 0, offsets[r]), Slice(OUTPUT, offsets[r + 1], problem.total - offsets[r + 1])]

    if vrank is None:
        builder.send(0, fold.partner(rank), Slice(OUTPUT, offsets[rank], counts[rank]))
        for piece in all_but(rank):
            builder.recv(last, fold.partner(rank), piece)
        return builder.build(problem, rank, "recursive_doubling")

    def blocks(lo: int, hi: int) -> Slice:
        start, stop = offsets[fold.first(lo)], offsets[fold.first(hi)]
        return Slice(OUTPUT, start, stop - start)

    if fold.folded(rank):
        partner = fold.partner(rank)
        builder.recv(0, partner, Slice(OUTPUT, offsets[partner], counts[partner]))
    gather_rounds(builder, fold, vrank, first, blocks)
    if fold.folded(rank):
        for piece in all_but(fold.partner(rank)):
            builder.send(last, fold.partner(rank), piece)
    return builder.build(problem, rank, "recursive_doubling")


def bruck(problem: Problem, rank: int) -> Schedule:
    """Bruck: ceil(log2 n) steps for any n, without a fold.

    After round k rank r holds the blocks of ranks r, r + 1, ..., r + 2**(k+1) - 1
    (mod n). In round k (distance d = 2**k) it sends the first min(d, n - d)
    of the blocks it holds, ranks [r, r + that), to rank r - d, and receives
    from rank r + d that rank's first blocks, ranks [r + d, r + d + min(d, n - d)).
    Blocks go straight to their place in the output (rank order), so instead
    of the classic final rotation through a scratch buffer, a range that wraps
    past rank n - 1 travels as two messages; sender and receiver split it at
    the same rank, so they agree on the messages.

    Cost for total T = sum(counts): ceil(log2 n) steps, one or two messages
    each way per step; rank r receives T - counts[r] elements and sends n - 1
    blocks in all, its own in every round and block r + j in the rounds whose
    share reaches it (T (n - 1) / n elements for even counts); nothing is
    reduced. Good for small blocks on sizes that are not a power of two.
    """
    check_collective(problem, "all_gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "bruck")
    n, counts = problem.nranks, problem.counts
    offsets = problem.offsets()
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], out_offset=offsets[rank])

    def ranks_from(start: int, many: int) -> list[Slice]:
        """The output blocks of ranks [start, start + many) mod n, split where they wrap."""
        start %= n
        stop = start + many
        pieces = [(start, min(stop, n))] + ([(0, stop - n)] if stop > n else [])
        return [Slice(OUTPUT, offsets[a], offsets[b] - offsets[a]) for a, b in pieces]

    for k in range(ceil_log2(n)):
        distance = 1 << k
        many = min(distance, n - distance)
        for piece in ranks_from(rank, many):
            builder.send(k, (rank - distance) % n, piece)
        for piece in ranks_from(rank + distance, many):
            builder.recv(k, (rank + distance) % n, piece)
    return builder.build(problem, rank, "bruck")

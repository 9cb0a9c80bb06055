"""Reduce-scatter: rank r's output holds block r of the reduction of all inputs.

Ring. Every input holds n blocks in rank order (counts[r] elements at
offsets[r]; blocks may differ in size and may be empty, in which case no
message carries them). In step s = 0 .. n-2 rank r sends its partial of block
(r - s - 1) mod n to rank r + 1 and receives its left neighbour's partial of
block (r - s - 2) mod n, reducing it into a copy of its own input block. At
step 0 the partial sent is just the sender's own input block; afterwards it
is the block received in the previous step. The partials live in two scratch
slots used alternately, because a step may not receive into the slot it is
sending from; in the last step the block received is the rank's own, and it
is reduced straight into the output (pre-filled with the rank's own input
block).

Cost for total T = sum(counts): n - 1 steps; rank r sends T - counts[r]
elements and receives and reduces T - counts[r - 1] (about T (n - 1) / n for
even counts); scratch 2 max(counts) when n > 2.

Recursive halving and pairwise exchange are described with their costs where
they are defined below.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    check_collective,
    check_rank,
    copy_input_to_output,
    single_rank,
)
from meshcomm.algorithms._fold import Fold
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice


def ring(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "reduce_scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "ring")
    n, counts = problem.nranks, problem.counts
    offsets = problem.offsets()
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], in_offset=offsets[rank])
    slot_size = max(counts)

    def own(index: int) -> Slice:
        return Slice(INPUT, offsets[index], counts[index])

    def slot(step: int, index: int) -> Slice:
        return Slice(SCRATCH, (step % 2) * slot_size, counts[index])

    right, left = (rank + 1) % n, (rank - 1) % n
    for s in range(n - 1):
        sent = (rank - s - 1) % n
        builder.send(s, right, own(sent) if s == 0 else slot(s - 1, sent))
        received = (rank - s - 2) % n
        if s == n - 2:
            builder.recv_reduce(s, left, Slice(OUTPUT, 0, counts[rank]))
        else:
            builder.copy(s, own(received), slot(s, received))
            builder.recv_reduce(s, left, slot(s, received))
    return builder.build(problem, rank, "ring", scratch=2 * slot_size if n > 2 else 0)


def recursive_halving(problem: Problem, rank: int) -> Schedule:
    """Recursive halving, with a fold for sizes that are not a power of two.

    With p the largest power of two <= n and rem = n - p, step 0 folds
    (`_fold.py`): rank 2i + 1 (i < rem) sends its whole input to rank 2i,
    which reduces it into a scratch copy of its own. Vrank v of the p
    participants stands for a contiguous range of ranks, so any range of
    vranks is a contiguous range of blocks. In round j (distance
    d = p / 2**(j+1)) a participant splits its current range in two, sends
    its partial of the half without v to vrank v xor d and reduces that
    partner's partial of the half with v into its own. The first round sends
    straight from the input; the partials live in scratch, laid out like the
    input; the last round reduces straight into the output. A last step hands
    each folded rank its block.

    Cost for total T = sum(counts): log2 p steps, + 2 when n is not a power of
    two; a participant sends and receives about T (p - 1) / p elements in
    total (T / 2, T / 4, ... per round) and reduces as many; the fold adds T
    sent and reduced plus the folded rank's block. Scratch T, or none on two
    ranks.
    """
    check_collective(problem, "reduce_scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "recursive_halving")
    counts, total = problem.counts, problem.total
    offsets = problem.offsets()
    fold = Fold(problem.nranks)
    builder = StepBuilder()
    first = 1 if fold.rem else 0
    last = first + fold.rounds
    vrank = fold.vrank(rank)
    if vrank is None:
        builder.send(0, fold.partner(rank), Slice(INPUT, 0, total))
        builder.recv(last, fold.partner(rank), Slice(OUTPUT, 0, counts[rank]))
        return builder.build(problem, rank, "recursive_halving")
    folded = fold.folded(rank)
    if folded:
        builder.copy(0, Slice(INPUT, 0, total), Slice(SCRATCH, 0, total))
        builder.recv_reduce(0, fold.partner(rank), Slice(SCRATCH, 0, total))

    def blocks(buf: str, lo: int, hi: int) -> Slice:
        start, stop = offsets[fold.first(lo)], offsets[fold.first(hi)]
        return Slice(buf, start, stop - start)

    lo, hi = 0, fold.p
    for j in range(fold.rounds):
        step = first + j
        distance = fold.p >> (j + 1)
        middle = lo + distance
        keep, give = ((lo, middle), (middle, hi)) if vrank < middle else ((middle, hi), (lo, middle))
        source = INPUT if j == 0 and not folded else SCRATCH
        partial = blocks(SCRATCH, *keep)
        if j == fold.rounds - 1 and not folded:
            partial = Slice(OUTPUT, 0, counts[rank])
        if partial.buf != source:
            builder.copy(step, blocks(source, *keep), partial)
        partner = fold.peer(vrank ^ distance)
        builder.send(step, partner, blocks(source, *give))
        builder.recv_reduce(step, partner, partial)
        lo, hi = keep
    if folded:
        partner = fold.partner(rank)
        builder.copy(last, Slice(SCRATCH, offsets[rank], counts[rank]), Slice(OUTPUT, 0, counts[rank]))
        builder.send(last, partner, Slice(SCRATCH, offsets[partner], counts[partner]))
    scratch = total if folded or fold.rounds > 1 else 0
    return builder.build(problem, rank, "recursive_halving", scratch=scratch)


def pairwise(problem: Problem, rank: int) -> Schedule:
    """Pairwise exchange: every rank sends each peer its block directly.

    Every rank copies its own input block into its output. In step s - 1
    (s = 1 .. n - 1) rank r sends its input block for rank r + s to that rank
    and receives rank r - s's block for r, reducing it straight into its
    output. Each pair meets once and no partial is forwarded, so no scratch
    is needed.

    Cost for total T = sum(counts): n - 1 steps; rank r sends T - counts[r]
    elements and receives and reduces (n - 1) counts[r]. Same bytes as the
    ring, but every message goes directly, which suits uneven blocks.
    """
    check_collective(problem, "reduce_scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "pairwise")
    n, counts = problem.nranks, problem.counts
    offsets = problem.offsets()
    builder = StepBuilder()
    copy_input_to_output(builder, counts[rank], in_offset=offsets[rank])
    result = Slice(OUTPUT, 0, counts[rank])
    for s in range(1, n):
        to, source = (rank + s) % n, (rank - s) % n
        builder.send(s - 1, to, Slice(INPUT, offsets[to], counts[to]))
        builder.recv_reduce(s - 1, source, result)
    return builder.build(problem, rank, "pairwise")

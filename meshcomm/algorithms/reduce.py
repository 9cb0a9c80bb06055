"""Reduce: the elementwise reduction of every rank's input ends up in the root's output.

Binomial tree, the broadcast tree run backwards. Ranks are renumbered relative
to the root (vrank v = (rank - root) mod n). Every rank first copies its input
to its output, which from then on holds its partial result (on non-roots the
output is unconstrained, so it is free to serve as that temporary). In round k
a vrank whose lowest set bit is k sends its partial to vrank v - 2**k and is
done; a vrank that is a multiple of 2**(k+1) receives its partner's partial
(vrank v + 2**k, if it exists) and reduces it into its own. After ceil(log2 n)
rounds the root holds everything. Input is read only by the first copy, so
the algorithm is correct when input and output are the same memory.

Cost for count m: ceil(log2 n) steps; each non-root sends m elements once; the
root receives and reduces ceil(log2 n) messages of m elements, every rank
reduces m elements per child.

Rabenseifner (reduce-scatter + gather) is described, with its cost, where it
is defined below.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    ceil_log2,
    check_collective,
    check_rank,
    copy_input_to_output,
    lowbit,
    single_rank,
)
from meshcomm.algorithms._fold import Fold
from meshcomm.algorithms._fold import recursive_halving as reduce_scatter_rounds
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, Schedule, Slice, block_bounds


def binomial(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "binomial")
    n, count, root = problem.nranks, problem.count, problem.root
    builder = StepBuilder()
    partial = Slice(OUTPUT, 0, count)
    vrank = (rank - root) % n
    copy_input_to_output(builder, count)
    last_round = lowbit(vrank) if vrank else ceil_log2(n)
    for k in range(last_round):
        child = vrank + (1 << k)
        if child < n:
            builder.recv_reduce(k, (child + root) % n, partial)
    if vrank:
        builder.send(last_round, (rank - (1 << last_round)) % n, partial)
    return builder.build(problem, rank, "binomial")


def rabenseifner(problem: Problem, rank: int) -> Schedule:
    """Rabenseifner: recursive-halving reduce-scatter, then a binomial gather of the blocks to the root.

    Ranks are taken relative to the root and folded to a power of two p
    (`_fold.py`): with rem = n - p > 0, rank 2i + 1 (relative, i < rem) sends
    its whole buffer to rank 2i in step 0 and is done; the root is always
    vrank 0 of the p participants. The buffer, copied from input to output
    where it is worked on, is cut into p blocks; recursive halving leaves
    vrank v with block v reduced. The gather then runs the doubling the other
    way: in round k a vrank whose lowest set bit is k sends the blocks
    [v, v + 2**k) it has collected to vrank v - 2**k, which receives them
    straight into their place in its output, so the root ends up with all p.

    Cost for count m: 2 log2 p steps, + 1 when n is not a power of two; each
    participant sends m (p - 1) / p elements or fewer in the reduce-scatter
    and reduces as many; the root receives m (p - 1) / p in the gather, and
    vrank v sends its collected blocks once (2**lowbit(v) blocks). The fold
    costs m elements sent and reduced on 2 rem ranks. Beats the binomial tree
    (which moves m elements per level) on large buffers.
    """
    check_collective(problem, "reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "rabenseifner")
    count = problem.count
    fold = Fold(problem.nranks, problem.root)
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    whole = Slice(OUTPUT, 0, count)
    first = 1 if fold.rem else 0
    vrank = fold.vrank(rank)
    if vrank is None:
        builder.send(0, fold.partner(rank), whole)
        return builder.build(problem, rank, "rabenseifner")
    bounds = block_bounds(count, fold.p)

    def blocks(lo: int, hi: int) -> Slice:
        return Slice(OUTPUT, bounds[lo], bounds[hi] - bounds[lo])

    if fold.folded(rank):
        builder.recv_reduce(0, fold.partner(rank), whole)
    step = reduce_scatter_rounds(builder, fold, vrank, first, blocks)
    joined = lowbit(vrank) if vrank else fold.rounds
    for k in range(joined):
        child = vrank + (1 << k)
        builder.recv(step + k, fold.peer(child), blocks(child, child + (1 << k)))
    if vrank:
        builder.send(step + joined, fold.peer(vrank - (1 << joined)), blocks(vrank, vrank + (1 << joined)))
    return builder.build(problem, rank, "rabenseifner")

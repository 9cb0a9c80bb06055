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
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, Schedule, Slice


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

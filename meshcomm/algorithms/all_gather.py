"""All-gather: every rank's output holds all ranks' inputs concatenated in rank order.

Ring. Rank r's contribution is block r of the output (counts[r] elements at
offset offsets[r]; blocks may differ in size and may be empty, in which case
no message carries them). Each rank first copies its input into its own
block. Then in steps s = 0 .. n-2 rank r sends block (r - s) mod n to rank
r + 1 and receives block (r - s - 1) mod n from rank r - 1: every block
travels once around the ring, one hop per step.

Cost for total T = sum(counts): n - 1 steps; rank r sends T - counts[r + 1]
elements and receives T - counts[r]; nothing is reduced.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    check_collective,
    check_rank,
    copy_input_to_output,
    single_rank,
)
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

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

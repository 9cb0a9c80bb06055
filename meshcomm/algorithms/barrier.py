"""Barrier: no rank leaves before every rank has arrived.

Dissemination. In round k (k = 0 .. ceil(log2 n) - 1) rank r sends an empty
message to rank (r + 2**k) mod n and receives one from rank (r - 2**k) mod n.
A message carries everything its sender has learnt, so after round k a rank
knows that the 2**(k+1) ranks before it have arrived, and after the last round
it knows about everyone. Unlike the data collectives, these messages have zero
elements on purpose.

Cost: ceil(log2 n) steps, each one zero-element send and receive per rank;
no elements on the wire, nothing reduced.
"""

from __future__ import annotations

from meshcomm.algorithms._build import StepBuilder, ceil_log2, check_collective, check_rank, single_rank
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import SCRATCH, Schedule


def dissemination(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "barrier")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "dissemination")
    n = problem.nranks
    builder = StepBuilder()
    for k in range(ceil_log2(n)):
        distance = 1 << k
        builder.empty_message(k, (rank + distance) % n, SCRATCH, (rank - distance) % n, SCRATCH)
    return builder.build(problem, rank, "dissemination")

"""Barrier: no rank leaves before every rank has arrived.

Dissemination. In round k (k = 0 .. ceil(log2 n) - 1) rank r sends an empty
message to rank (r + 2**k) mod n and receives one from rank (r - 2**k) mod n.
A message carries everything its sender has learnt, so after round k a rank
knows that the 2**(k+1) ranks before it have arrived, and after the last round
it knows about everyone. Unlike the data collectives, these messages have zero
elements on purpose.

Cost: ceil(log2 n) steps, each one zero-element send and receive per rank;
no elements on the wire, nothing reduced.

Tree. A binomial tree rooted at rank 0 runs twice. Arrival goes up: in round
k a rank whose lowest set bit is k sends an empty message to rank r - 2**k,
once it has heard from its own children r + 2**j (j < k), so rank 0 learns
that everyone has arrived. Release goes down the same tree, farthest
children first: rank 0's message reaches every rank through the ranks that
heard from it, carrying everything rank 0 knew.

Cost: 2 ceil(log2 n) steps; every rank but 0 sends and receives one empty
message each way, rank 0 up to ceil(log2 n); 2 (n - 1) messages in all
against n ceil(log2 n) for dissemination, at twice the depth.
"""

from __future__ import annotations

from meshcomm.algorithms._build import StepBuilder, ceil_log2, check_collective, check_rank, lowbit, single_rank
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


def tree(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "barrier")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "tree")
    n = problem.nranks
    rounds = ceil_log2(n)
    joined = lowbit(rank) if rank else rounds
    builder = StepBuilder()
    for k in range(joined):
        if rank + (1 << k) < n:
            builder.empty_recv(k, rank + (1 << k))
    if rank:
        builder.empty_send(joined, rank - (1 << joined))
        builder.empty_recv(2 * rounds - 1 - joined, rank - (1 << joined))
    for k in reversed(range(joined)):
        if rank + (1 << k) < n:
            builder.empty_send(2 * rounds - 1 - k, rank + (1 << k))
    return builder.build(problem, rank, "tree")

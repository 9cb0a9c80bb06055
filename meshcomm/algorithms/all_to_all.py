"""All-to-all: block (i, j) of rank i's input lands in rank j's output, blocks in source order.

Pairwise exchange. Rank r's input is its row of the count matrix (block j
goes to rank j), its output its column (block i came from rank i). The own
block is a local copy. Then in steps s = 1 .. n-1 rank r sends its block for
rank (r + s) mod n and receives the block from rank (r - s) mod n, so every
rank talks to exactly one sender and one receiver per step and each pair
meets exactly once. Empty blocks send no message.

Cost: n - 1 steps; rank r sends the sum of its row minus its own block and
receives the sum of its column minus its own block; nothing is reduced.
"""

from __future__ import annotations

from meshcomm.algorithms._build import StepBuilder, check_collective, check_rank, single_rank
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, Schedule, Slice, prefix_offsets


def pairwise(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "all_to_all")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "pairwise")
    n = problem.nranks
    row = prefix_offsets([problem.matrix(rank, j) for j in range(n)])
    column = prefix_offsets([problem.matrix(i, rank) for i in range(n)])
    builder = StepBuilder()
    own = problem.matrix(rank, rank)
    builder.copy(0, Slice(INPUT, row[rank], own), Slice(OUTPUT, column[rank], own))
    for s in range(1, n):
        to, source = (rank + s) % n, (rank - s) % n
        builder.send(s - 1, to, Slice(INPUT, row[to], problem.matrix(rank, to)))
        builder.recv(s - 1, source, Slice(OUTPUT, column[source], problem.matrix(source, rank)))
    return builder.build(problem, rank, "pairwise")

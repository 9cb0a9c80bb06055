"""Broadcast: the root's buffer ends up in every rank's output.

Binomial tree. Ranks are renumbered relative to the root (vrank v = (rank -
root) mod n), so the root is vrank 0. In round k (k = 0 .. ceil(log2 n) - 1)
every vrank v < 2**k that already holds the data sends it to vrank v + 2**k,
so the number of holders doubles each round. A vrank receives once, in the
round of its highest bit, then forwards in every later round where its
partner exists. The root first copies input to output and sends from output;
everyone else receives straight into output, so the algorithm is correct when
input and output are the same memory.

Cost for count m: ceil(log2 n) steps; the root sends up to ceil(log2 n)
messages of m elements, every other rank receives m elements once; nothing is
reduced.

Pipelined chain. The vranks form a chain 0 -> 1 -> ... -> n-1 and the buffer
is cut into segments (`segments`, default min(m, 8)). In step t vrank v
receives segment t - v + 1 from its predecessor while sending segment t - v to
its successor, so after the pipeline fills every link is busy at once.

Cost: n - 1 + segments - 1 steps; every rank but the last sends m elements
and every rank but the root receives m elements; nothing is reduced. Better
than the tree when m is large and the per-message latency is small.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    ceil_log2,
    check_collective,
    check_rank,
    copy_input_to_output,
    single_rank,
)
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, Schedule, Slice, block_bounds

CHAIN_SEGMENTS = 8


def binomial(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "broadcast")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "binomial")
    n, count, root = problem.nranks, problem.count, problem.root
    builder = StepBuilder()
    data = Slice(OUTPUT, 0, count)
    vrank = (rank - root) % n
    if vrank == 0:
        copy_input_to_output(builder, count)
    for k in range(ceil_log2(n)):
        distance = 1 << k
        if vrank < distance and vrank + distance < n:
            builder.send(k, (rank + distance) % n, data)
        elif distance <= vrank < 2 * distance:
            builder.recv(k, (rank - distance) % n, data)
    return builder.build(problem, rank, "binomial")


def chain(problem: Problem, rank: int, segments: int | None = None) -> Schedule:
    check_collective(problem, "broadcast")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "chain")
    n, count, root = problem.nranks, problem.count, problem.root
    if segments is None:
        segments = max(1, min(count, CHAIN_SEGMENTS))
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    builder = StepBuilder()
    vrank = (rank - root) % n
    bounds = block_bounds(count, segments)
    if vrank == 0:
        copy_input_to_output(builder, count)
    for segment in range(segments):
        piece = Slice(OUTPUT, bounds[segment], bounds[segment + 1] - bounds[segment])
        # Segment s leaves vrank v in step s + v and reaches vrank v in step s + v - 1.
        if vrank > 0:
            builder.recv(segment + vrank - 1, (rank - 1) % n, piece)
        if vrank < n - 1:
            builder.send(segment + vrank, (rank + 1) % n, piece)
    return builder.build(problem, rank, "chain", segments=segments)

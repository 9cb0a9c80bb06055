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

The two scatter + all-gather broadcasts (van de Geijn), for large buffers,
are described with their costs where they are defined below.
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
from meshcomm.algorithms._fold import recursive_doubling as gather_rounds
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


def scatter_ring(problem: Problem, rank: int) -> Schedule:
    """Scatter + ring all-gather (van de Geijn), for large buffers.

    The buffer is cut into n blocks, block v for vrank v = (rank - root) mod n.
    The root copies input to output and scatters the blocks down the binomial
    tree of `scatter.binomial`: in step L - 1 - k (L = ceil(log2 n)) a vrank
    that is a multiple of 2**(k+1) sends the blocks of the subtree of vrank
    v + 2**k, [v + 2**k, v + 2**(k+1)), to it. Every block lands directly at
    its place in the receiver's output, so no scratch is needed. A ring
    all-gather over the vranks then completes every output: in ring step s
    vrank v sends block v - s to vrank v + 1 and receives block v - s - 1.

    Cost for count m: ceil(log2 n) + n - 1 steps; the root sends about
    m (n - 1) / n elements in the scatter, every rank sends and receives about
    m (n - 1) / n in the ring, so no rank sends more than about 2 m (the
    binomial tree's root sends m ceil(log2 n)); nothing is reduced.
    """
    check_collective(problem, "broadcast")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "scatter_ring")
    n, count, root = problem.nranks, problem.count, problem.root
    rounds = ceil_log2(n)
    bounds = block_bounds(count, n)
    builder = StepBuilder()
    vrank = (rank - root) % n

    def blocks(lo: int, hi: int) -> Slice:
        return Slice(OUTPUT, bounds[lo], bounds[hi] - bounds[lo])

    def subtree_end(v: int) -> int:
        return min(n, v + (1 << lowbit(v)))

    if vrank == 0:
        copy_input_to_output(builder, count)
        level = rounds
    else:
        level = lowbit(vrank)
        builder.recv(rounds - 1 - level, (rank - (1 << level)) % n, blocks(vrank, subtree_end(vrank)))
    for k in reversed(range(level)):
        child = vrank + (1 << k)
        if child < n:
            builder.send(rounds - 1 - k, (child + root) % n, blocks(child, subtree_end(child)))
    right, left = (rank + 1) % n, (rank - 1) % n
    for s in range(n - 1):
        sent, received = (vrank - s) % n, (vrank - s - 1) % n
        builder.send(rounds + s, right, blocks(sent, sent + 1))
        builder.recv(rounds + s, left, blocks(received, received + 1))
    return builder.build(problem, rank, "scatter_ring")


def scatter_recursive_doubling(problem: Problem, rank: int) -> Schedule:
    """Scatter + recursive-doubling all-gather, for large buffers on many ranks.

    Ranks are taken relative to the root and folded to a power of two p
    (`_fold.py`): the root is vrank 0 of the p participants, and rank 2i + 1
    (relative, i < rem = n - p) sits out until the last step, when rank 2i
    hands it the whole buffer. The buffer is cut into p blocks. The root
    copies input to output; in step j (distance d = p / 2**(j+1)) every vrank
    that is a multiple of 2d sends blocks [v + d, v + 2d) to vrank v + d, so
    after log2 p steps vrank v holds block v. Recursive doubling then gathers
    the blocks: in round k vrank v exchanges its aligned group of 2**k blocks
    with vrank v xor 2**k. Every block lands at its place in the output.

    Cost for count m: 2 log2 p steps, + 1 when n is not a power of two; the
    root sends m (p - 1) / p elements in the scatter, every participant sends
    and receives m (p - 1) / p in the all-gather, and the 2 rem ranks of the
    pairs move another m; nothing is reduced. Fewer steps than scatter_ring.
    """
    check_collective(problem, "broadcast")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "scatter_recursive_doubling")
    count = problem.count
    fold = Fold(problem.nranks, problem.root)
    builder = StepBuilder()
    whole = Slice(OUTPUT, 0, count)
    last = 2 * fold.rounds
    vrank = fold.vrank(rank)
    if vrank is None:
        builder.recv(last, fold.partner(rank), whole)
        return builder.build(problem, rank, "scatter_recursive_doubling")
    bounds = block_bounds(count, fold.p)

    def blocks(lo: int, hi: int) -> Slice:
        return Slice(OUTPUT, bounds[lo], bounds[hi] - bounds[lo])

    if vrank == 0:
        copy_input_to_output(builder, count)
    for j in range(fold.rounds):
        distance = fold.p >> (j + 1)
        if vrank % (2 * distance) == 0:
            builder.send(j, fold.peer(vrank + distance), blocks(vrank + distance, vrank + 2 * distance))
        elif vrank % (2 * distance) == distance:
            builder.recv(j, fold.peer(vrank - distance), blocks(vrank, vrank + distance))
    gather_rounds(builder, fold, vrank, fold.rounds, blocks)
    if fold.folded(rank):
        builder.send(last, fold.partner(rank), whole)
    return builder.build(problem, rank, "scatter_recursive_doubling")

"""All-reduce: every rank's output holds the elementwise reduction of all inputs.

Ring. The buffer is cut into n chunks, one chunk per rank, with
`block_bounds` so counts that do not divide evenly (or are smaller than n)
still work; empty chunks send no message. Every rank first copies its input to
its output and works in the output from then on, so the algorithm is correct
when input and output are the same memory. Reduce-scatter phase, steps
s = 0 .. n-2: rank r sends chunk (r - s) mod n to rank r + 1 and receives
chunk (r - s - 1) mod n from rank r - 1, reducing it into its own copy; after
n - 1 steps rank r holds the complete chunk (r + 1) mod n. All-gather phase,
steps s = 0 .. n-2: rank r sends chunk (r + 1 - s) mod n onwards and receives
chunk (r - s) mod n, overwriting its copy with the complete one.

Cost for count m: 2(n - 1) steps; each rank sends and receives about
2 m (n - 1) / n elements and reduces about m (n - 1) / n. Bandwidth-optimal;
latency grows linearly with n.

Recursive doubling. With p the largest power of two <= n and rem = n - p,
the first 2 rem ranks pair up: each even one sends its whole buffer to the odd
one after it and waits. The remaining p ranks (vranks) run log2 p rounds; in
round k a vrank exchanges its whole partial with vrank xor 2**k: it sends its
output and receives into scratch (a receive may not overlap a send of the same
step), and reduces the scratch into its output at the start of the next step.
Finally the odd ranks of the pairs send the result back to their even
partners.

Cost for count m: log2 p + 1 steps when n is a power of two, log2 p + 2
otherwise (the hand-back shares a step with the last local reduction); each
rank sends and receives m elements per round and reduces m per round. Best
for small messages.

Rabenseifner and binomial (reduce + broadcast) are described, with their
costs, where they are defined below; the double binary tree lives in
`double_binary_tree.py`.
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
from meshcomm.algorithms._fold import recursive_halving as reduce_scatter_rounds
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, SCRATCH, Schedule, Slice, block_bounds


def ring(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "ring")
    n, count = problem.nranks, problem.count
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    bounds = block_bounds(count, n)

    def chunk(index: int) -> Slice:
        index %= n
        return Slice(OUTPUT, bounds[index], bounds[index + 1] - bounds[index])

    right, left = (rank + 1) % n, (rank - 1) % n
    for s in range(n - 1):
        builder.send(s, right, chunk(rank - s))
        builder.recv_reduce(s, left, chunk(rank - s - 1))
    for s in range(n - 1):
        builder.send(n - 1 + s, right, chunk(rank + 1 - s))
        builder.recv(n - 1 + s, left, chunk(rank - s))
    return builder.build(problem, rank, "ring")


def recursive_doubling(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "recursive_doubling")
    n, count = problem.nranks, problem.count
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    data = Slice(OUTPUT, 0, count)
    received = Slice(SCRATCH, 0, count)
    p = 1 << (n.bit_length() - 1)
    rem = n - p
    rounds = p.bit_length() - 1
    # With rem > 0 step 0 folds the extra ranks in and the last step hands the result back.
    first = 1 if rem else 0
    if rank < 2 * rem and rank % 2 == 0:
        builder.send(0, rank + 1, data)
        builder.recv(first + rounds, rank + 1, data)
        return builder.build(problem, rank, "recursive_doubling")
    if rank < 2 * rem:
        builder.recv_reduce(0, rank - 1, data)
    vrank = rank // 2 if rank < 2 * rem else rank - rem

    def real(v: int) -> int:
        return 2 * v + 1 if v < rem else v + rem

    for k in range(rounds):
        partner = real(vrank ^ (1 << k))
        step = first + k
        builder.send(step, partner, data)
        builder.recv(step, partner, received)
        builder.reduce(step + 1, received, data)
    if rank < 2 * rem:
        builder.send(first + rounds, rank - 1, data)
    return builder.build(problem, rank, "recursive_doubling", scratch=count if rounds else 0)


def rabenseifner(problem: Problem, rank: int) -> Schedule:
    """Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling all-gather.

    The buffer is cut into p blocks, one per participant of the power-of-two
    fold (`_fold.py`; p the largest power of two <= n). Every rank copies its
    input to its output and works there. With rem = n - p > 0, step 0 folds:
    rank 2i + 1 (i < rem) sends its whole buffer to rank 2i, which reduces it
    into its own. The p participants then reduce-scatter by recursive halving
    (each round sends the half of the current range it does not keep and
    reduces the partner's partial of the half it keeps), after which vrank v
    holds block v reduced; recursive doubling gathers the blocks back, and a
    last step hands the result to the folded ranks.

    Cost for count m: 2 log2 p steps, + 2 when n is not a power of two; each
    participant sends and receives 2 m (p - 1) / p elements and reduces
    m (p - 1) / p; the fold adds m elements each way (and m reduced) on the
    2 rem ranks of the pairs. Bandwidth-optimal like the ring, with
    logarithmic instead of linear latency.
    """
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "rabenseifner")
    count = problem.count
    fold = Fold(problem.nranks)
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    whole = Slice(OUTPUT, 0, count)
    first = 1 if fold.rem else 0
    last = first + 2 * fold.rounds
    vrank = fold.vrank(rank)
    if vrank is None:
        builder.send(0, fold.partner(rank), whole)
        builder.recv(last, fold.partner(rank), whole)
        return builder.build(problem, rank, "rabenseifner")
    bounds = block_bounds(count, fold.p)

    def blocks(lo: int, hi: int) -> Slice:
        return Slice(OUTPUT, bounds[lo], bounds[hi] - bounds[lo])

    if fold.folded(rank):
        builder.recv_reduce(0, fold.partner(rank), whole)
    step = reduce_scatter_rounds(builder, fold, vrank, first, blocks)
    gather_rounds(builder, fold, vrank, step, blocks)
    if fold.folded(rank):
        builder.send(last, fold.partner(rank), whole)
    return builder.build(problem, rank, "rabenseifner")


def binomial(problem: Problem, rank: int) -> Schedule:
    """Binomial reduce to rank 0, then binomial broadcast from rank 0.

    The two trees of `reduce.binomial` and `broadcast.binomial` back to back,
    in the output buffer (input is read once, by the first copy). In round k
    of the reduce a rank whose lowest set bit is k sends its partial to rank
    r - 2**k; a multiple of 2**(k+1) reduces its partner's partial into its
    own. The broadcast runs the same tree the other way.

    Cost for count m, L = ceil(log2 n): 2 L steps; every rank but 0 sends and
    receives m elements once per tree, rank 0 receives and reduces up to L
    messages of m and sends as many. Whole-buffer messages: good for tiny
    buffers only.
    """
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "binomial")
    n, count = problem.nranks, problem.count
    rounds = ceil_log2(n)
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    data = Slice(OUTPUT, 0, count)
    joined = lowbit(rank) if rank else rounds
    for k in range(joined):
        if rank + (1 << k) < n:
            builder.recv_reduce(k, rank + (1 << k), data)
    if rank:
        builder.send(joined, rank - (1 << joined), data)
    for k in range(rounds):
        distance = 1 << k
        if rank < distance and rank + distance < n:
            builder.send(rounds + k, rank + distance, data)
        elif distance <= rank < 2 * distance:
            builder.recv(rounds + k, rank - distance, data)
    return builder.build(problem, rank, "binomial")

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

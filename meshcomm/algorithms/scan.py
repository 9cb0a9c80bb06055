"""Scan and exscan: rank r's output holds the reduction of the inputs of ranks 0..r (scan) or 0..r-1 (exscan).

Linear (a chain). Scan: every rank copies its input to its output; rank r
waits in step r - 1 for the prefix of ranks 0..r-1 from rank r - 1 and reduces
it into its output, which is then the prefix 0..r, and passes that on to rank
r + 1 in step r. Exscan: every rank keeps a copy of its input in scratch;
rank r receives the prefix 0..r-1 straight into its output in step r - 1,
reduces it into the scratch copy to get the prefix 0..r, and sends that on in
step r. Input is read only by the first copy, so both are correct when input
and output are the same memory; exscan leaves rank 0's output untouched.
Cost for count m: n - 1 steps (the last rank waits for all of them); each rank
sends and receives m elements once and reduces m.

Recursive doubling (Hillis-Steele). Scan: in round k rank r sends its partial
(the reduction of ranks r - 2**k + 1 .. r) to rank r + 2**k and receives the
partial of ranks r - 2**(k+1) + 1 .. r - 2**k from rank r - 2**k. The partial
lives in output and the received one in scratch (a receive may not overlap a
send of the same step); the scratch is reduced into the output at the start
of the next step. Exscan keeps the inclusive partial in scratch, which is what
is sent, and the exclusive result in output: the first message received
becomes the output, later ones are reduced into both. Cost for count m:
ceil(log2 n) + 1 steps; each rank sends and receives up to ceil(log2 n)
messages of m elements and reduces as many (exscan: up to twice as many).
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
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice


def linear(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "scan", "exscan")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "linear")
    n, count = problem.nranks, problem.count
    builder = StepBuilder()
    output = Slice(OUTPUT, 0, count)
    if problem.collective == "scan":
        copy_input_to_output(builder, count)
        if rank > 0:
            builder.recv_reduce(rank - 1, rank - 1, output)
        if rank < n - 1:
            builder.send(rank, rank + 1, output)
        return builder.build(problem, rank, "linear")
    if rank == n - 1 and rank > 0:
        builder.recv(rank - 1, rank - 1, output)
        return builder.build(problem, rank, "linear")
    prefix = Slice(SCRATCH, 0, count)
    builder.copy(0, Slice(INPUT, 0, count), prefix)
    if rank > 0:
        builder.recv(rank - 1, rank - 1, output)
        builder.reduce(rank, output, prefix)
    if rank < n - 1:
        builder.send(rank, rank + 1, prefix)
    return builder.build(problem, rank, "linear", scratch=count)


def recursive_doubling(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "scan", "exscan")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "recursive_doubling")
    n, count = problem.nranks, problem.count
    inclusive = problem.collective == "scan"
    builder = StepBuilder()
    output = Slice(OUTPUT, 0, count)
    received = Slice(SCRATCH, 0, count)
    partial = output if inclusive else Slice(SCRATCH, count, count)
    rounds = ceil_log2(n)
    last_send = max((k for k in range(rounds) if rank + (1 << k) < n), default=-1)
    if inclusive:
        copy_input_to_output(builder, count)
    elif last_send >= 0:
        builder.copy(0, Slice(INPUT, 0, count), partial)
    for k in range(rounds):
        distance = 1 << k
        if rank + distance < n:
            builder.send(k, rank + distance, partial)
        if rank - distance >= 0:
            builder.recv(k, rank - distance, received)
            # Folded in before the next step's sends read the partial.
            if inclusive:
                builder.reduce(k + 1, received, output)
                continue
            if k == 0:
                builder.copy(k + 1, received, output)
            else:
                builder.reduce(k + 1, received, output)
            if k < last_send:
                builder.reduce(k + 1, received, partial)
    scratch = count * (1 if inclusive else 2) if n > 1 else 0
    return builder.build(problem, rank, "recursive_doubling", scratch=scratch)

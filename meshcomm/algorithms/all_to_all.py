"""All-to-all: block (i, j) of rank i's input lands in rank j's output, blocks in source order.

Pairwise exchange. Rank r's input is its row of the count matrix (block j
goes to rank j), its output its column (block i came from rank i). The own
block is a local copy. Then in steps s = 1 .. n-1 rank r sends its block for
rank (r + s) mod n and receives the block from rank (r - s) mod n, so every
rank talks to exactly one sender and one receiver per step and each pair
meets exactly once. Empty blocks send no message.

Cost: n - 1 steps; rank r sends the sum of its row minus its own block and
receives the sum of its column minus its own block; nothing is reduced.

Bruck (small messages, logarithmic steps) and scattered (every exchange at
once, throttled) are described with their costs where they are defined below.
"""

from __future__ import annotations

from meshcomm.algorithms._build import StepBuilder, ceil_log2, check_collective, check_rank, single_rank
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice, prefix_offsets

# MPICH's MPIR_CVAR_ALLTOALL_THROTTLE: exchanges in flight at once per rank.
SCATTERED_THROTTLE = 32


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


def scattered(problem: Problem, rank: int, throttle: int | None = None) -> Schedule:
    """Scattered: post the exchanges with many peers at once, `throttle` peers per step.

    As in the pairwise exchange, rank r sends its block for rank r + s and
    receives rank r - s's block for it, for s = 1 .. n - 1; but instead of one
    peer per step, the exchanges with s in [b * throttle + 1, (b + 1) * throttle]
    all run together in step b (default throttle 32, MPICH's), so the network
    sees many messages in flight while no rank floods it with n of them.
    Blocks go straight from input to output; the own block is copied.

    Cost: ceil((n - 1) / throttle) steps of up to `throttle` messages each
    way; rank r sends its row minus its own block and receives its column
    minus its own block; nothing is reduced.
    """
    check_collective(problem, "all_to_all")
    check_rank(problem, rank)
    if throttle is None:
        throttle = SCATTERED_THROTTLE
    if throttle < 1:
        raise ValueError(f"throttle must be >= 1, got {throttle}")
    return exchanges_in_steps(problem, rank, throttle, "scattered", throttle=throttle)


def exchanges_in_steps(problem: Problem, rank: int, per_step: int, algorithm: str, **params: object) -> Schedule:
    """The scattered exchange's schedule: `per_step` peers per step, named `algorithm` (also direct's, all in one)."""
    if problem.nranks == 1:
        return single_rank(problem, algorithm)
    n = problem.nranks
    row = prefix_offsets([problem.matrix(rank, j) for j in range(n)])
    column = prefix_offsets([problem.matrix(i, rank) for i in range(n)])
    builder = StepBuilder()
    own = problem.matrix(rank, rank)
    builder.copy(0, Slice(INPUT, row[rank], own), Slice(OUTPUT, column[rank], own))
    for s in range(1, n):
        to, source = (rank + s) % n, (rank - s) % n
        step = (s - 1) // per_step
        builder.send(step, to, Slice(INPUT, row[to], problem.matrix(rank, to)))
        builder.recv(step, source, Slice(OUTPUT, column[source], problem.matrix(source, rank)))
    return builder.build(problem, rank, algorithm, **params)


def bruck(problem: Problem, rank: int) -> Schedule:
    """Bruck: ceil(log2 n) steps, each one packed message per direction, for small blocks.

    Think of rank r's blocks as positions: position i holds the block going
    from its source s to rank s + i (mod n); at the start rank r holds its own
    row, position i being its block for rank r + i. In round k (distance
    2**k) every block whose position has bit k set moves 2**k ranks forward,
    to rank r + 2**k, so a block reaches its destination once the bits of its
    position are used up, after at most ceil(log2 n) hops. Each round's
    blocks are packed (local copies) into one contiguous message in position
    order; the receiver keeps each round's message in its own scratch area,
    packs from there in a later round, and copies a block that has arrived
    into its place in the output (source order). Every rank knows the whole
    count matrix, so everyone computes every message's layout alike.

    Cost: ceil(log2 n) communication steps plus a last local one; one message
    each way per step, carrying the blocks whose position has bit k set
    (about half the row each round for even counts, so about
    T_r log2(n) / 2 elements sent for a row of T_r, against T_r for
    pairwise), every forwarded block copied once per hop; scratch: one
    staging area plus every round's received message. Nothing is reduced.
    Fewest messages; worth it when latency dominates.
    """
    check_collective(problem, "all_to_all")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "bruck")
    n = problem.nranks
    rounds = ceil_log2(n)
    row = prefix_offsets([problem.matrix(rank, j) for j in range(n)])
    column = prefix_offsets([problem.matrix(i, rank) for i in range(n)])

    def moved(sender: int, k: int) -> list[tuple[int, int]]:
        """(position, count) of the blocks `sender` sends in round k, in message order."""
        blocks = []
        for position in range(1, n):
            if position >> k & 1:
                source = (sender - position % (1 << k)) % n
                blocks.append((position, problem.matrix(source, (source + position) % n)))
        return blocks

    sent = [moved(rank, k) for k in range(rounds)]
    staging = max(sum(c for _, c in blocks) for blocks in sent)
    arrived: list[dict[int, Slice]] = []  # per round: position -> where its block landed in scratch
    areas: list[int] = []  # per round: where its received message starts in scratch
    base = staging
    for k in range(rounds):
        areas.append(base)
        layout = {}
        for position, c in moved((rank - (1 << k)) % n, k):
            layout[position] = Slice(SCRATCH, base, c)
            base += c
        arrived.append(layout)

    def held(k: int, position: int) -> Slice:
        """Where rank holds the block at `position` before round k."""
        low = position % (1 << k)
        if low == 0:
            to = (rank + position) % n
            return Slice(INPUT, row[to], problem.matrix(rank, to))
        return arrived[low.bit_length() - 1][position]

    builder = StepBuilder()
    own = problem.matrix(rank, rank)
    builder.copy(0, Slice(INPUT, row[rank], own), Slice(OUTPUT, column[rank], own))
    for k in range(rounds + 1):
        if k:
            for position, piece in arrived[k - 1].items():
                if position >> k == 0:
                    source = (rank - position) % n
                    builder.copy(k, piece, Slice(OUTPUT, column[source], piece.count))
        if k == rounds:
            break
        offset = 0
        for position, c in sent[k]:
            builder.copy(k, held(k, position), Slice(SCRATCH, offset, c))
            offset += c
        builder.send(k, (rank + (1 << k)) % n, Slice(SCRATCH, 0, offset))
        end = areas[k + 1] if k + 1 < rounds else base
        builder.recv(k, (rank - (1 << k)) % n, Slice(SCRATCH, areas[k], end - areas[k]))
    return builder.build(problem, rank, "bruck", scratch=base)

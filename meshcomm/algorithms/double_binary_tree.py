"""All-reduce on NCCL's double binary tree: two complementary trees, half the data on each, pipelined.

The first tree is an in-order binary tree over the ranks: rank r != 0 with
lowest set bit b has the children r - b/2 and the largest r + b' < n with
b' <= b/2, and its parent is (r - b) + 2b, or r - b when that is n or more;
rank 0 is the root and has one child, the largest power of two below n.
Every odd rank is a leaf. The second tree relabels the first: mirrored
(rank r plays n - 1 - r) when n is even, so there every even rank is a leaf
and each rank is a leaf in one tree and inner in at most the other, which
halves the work of the busiest ranks; shifted by one (rank r plays
r - 1 mod n) when n is odd, where mirroring would not change the parity.

The buffer is cut into two halves, the first reduced and broadcast on the
first tree, the second on the second, and each half into `segments` chunks
(default min(8, m // 2), at least 1) that flow through the tree one step
apart. With D the tree's depth and d a rank's depth, chunk c goes up from
depth d in step c + D - d: a rank recv-reduces it from its first child one
step earlier, while its second child's copy lands in a scratch slot and is
reduced in at the start of the sending step. The root completes chunk c in
step c + D and sends it down at once; chunk c leaves depth d downwards in
step D + c + d. Both trees run in the same steps, each on its own half and
scratch slot. The output is worked on from the first copy of the input.

Cost for count m: 2 D + segments - 1 steps (D = ceil(log2 n), the depth of
both trees, which have the same shape); a
rank inner in one tree and a leaf in the other sends and receives at most
2 m elements (m / 2 up and down in each tree, m / 2 to and from each child
in its inner tree) and reduces at most m; scratch: one chunk per tree in
which the rank has two children.
Logarithmic latency with ring-like bandwidth once the pipeline is full.
"""

from __future__ import annotations

from functools import lru_cache

from meshcomm.algorithms._build import StepBuilder, check_collective, check_rank, copy_input_to_output, single_rank
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import OUTPUT, SCRATCH, Schedule, Slice, block_bounds

SEGMENTS = 8


def btree_parent(n: int, rank: int) -> int | None:
    """The first tree's parent of `rank` (None for the root, rank 0)."""
    if rank == 0:
        return None
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    return up if up < n else rank ^ bit


def btree_children(n: int, rank: int) -> list[int]:
    """The first tree's children of `rank`, left one first."""
    if rank == 0:
        return [1 << ((n - 1).bit_length() - 1)] if n > 1 else []
    half = (rank & -rank) >> 1
    if half == 0:
        return []
    right = half
    while right and rank + right >= n:
        right >>= 1
    return [rank - half] + ([rank + right] if right else [])


class Tree:
    """One of the two trees: the first one relabelled by `play` (rank -> the first tree's rank it plays)."""

    def __init__(self, n: int, which: int) -> None:
        self.n = n
        self.which = which

    def play(self, rank: int) -> int:
        if self.which == 0:
            return rank
        return self.n - 1 - rank if self.n % 2 == 0 else (rank - 1) % self.n

    def player(self, position: int) -> int:
        if self.which == 0:
            return position
        return self.n - 1 - position if self.n % 2 == 0 else (position + 1) % self.n

    def parent(self, rank: int) -> int | None:
        up = btree_parent(self.n, self.play(rank))
        return None if up is None else self.player(up)

    def children(self, rank: int) -> list[int]:
        return [self.player(c) for c in btree_children(self.n, self.play(rank))]

    def depth(self, rank: int) -> int:
        position, depth = self.play(rank), 0
        while position:
            position = btree_parent(self.n, position)
            depth += 1
        return depth



@lru_cache(maxsize=256)
def btree_height(n: int) -> int:
    """The depth of the deepest rank; the second tree, a relabelling, has the same."""
    return max(Tree(n, 0).depth(r) for r in range(n))


def all_reduce(problem: Problem, rank: int, segments: int | None = None) -> Schedule:
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "double_binary_tree")
    n, count = problem.nranks, problem.count
    if segments is None:
        segments = max(1, min(SEGMENTS, count // 2))
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    halves = block_bounds(count, 2)
    slot_size = -(-(halves[1] - halves[0]) // segments)
    slots = 0  # scratch slots: one per tree in which this rank has two children
    for which in (0, 1):
        tree = Tree(n, which)
        start = halves[which]
        bounds = block_bounds(halves[which + 1] - start, segments)
        height, depth = btree_height(n), tree.depth(rank)
        parent, children = tree.parent(rank), tree.children(rank)
        slot_offset = slots * slot_size
        slots += len(children) == 2
        for c in range(segments):
            chunk = Slice(OUTPUT, start + bounds[c], bounds[c + 1] - bounds[c])
            up = c + height - depth  # the step chunk c leaves this rank upwards (the root: is complete)
            if children:
                builder.recv_reduce(up - 1, children[0], chunk)
            if len(children) == 2:
                slot = Slice(SCRATCH, slot_offset, chunk.count)
                builder.recv(up - 1, children[1], slot)
                builder.reduce(up, slot, chunk)
            down = height + c + depth  # the step chunk c leaves this rank downwards
            if parent is not None:
                builder.send(up, parent, chunk)
                builder.recv(down - 1, parent, chunk)
            for child in children:
                builder.send(down, child, chunk)
    return builder.build(problem, rank, "double_binary_tree", scratch=slots * slot_size, segments=segments)

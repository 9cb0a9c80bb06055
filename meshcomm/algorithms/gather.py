"""Gather: the root's output holds all ranks' inputs concatenated in rank order.

Linear. Every non-root sends its input straight to the root in step 0; the
root copies its own input into its block and receives every other block
directly into its output. Cost: 1 step; the root receives T - counts[root]
elements in n - 1 messages (T = sum(counts)); nothing is reduced.

Binomial tree. Ranks are renumbered relative to the root (vrank v = (rank -
root) mod n). In round k a vrank whose lowest set bit is k sends everything it
has gathered, the blocks of vranks [v, v + 2**k), to vrank v - 2**k, and a
vrank that is a multiple of 2**(k+1) receives the blocks of vranks
[v + 2**k, v + 2**(k+1)) from that child. Inner ranks collect their subtree in
scratch, laid out in vrank order so each subtree is one contiguous range;
leaves send their input directly, and the root receives directly into its
output (a range that wraps past rank n-1 travels as two messages). Cost:
ceil(log2 n) steps; the root receives T - counts[root] elements in
ceil(log2 n) messages or a few more; a vrank v sends the elements of its
subtree once; nothing is reduced.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    RootedTree,
    StepBuilder,
    ceil_log2,
    check_collective,
    check_rank,
    copy_input_to_output,
    lowbit,
    single_rank,
)
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice


def linear(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "linear")
    counts, root = problem.counts, problem.root
    offsets = problem.offsets()
    builder = StepBuilder()
    if rank == root:
        copy_input_to_output(builder, counts[root], out_offset=offsets[root])
        for peer in range(problem.nranks):
            if peer != root:
                builder.recv(0, peer, Slice(OUTPUT, offsets[peer], counts[peer]))
    else:
        builder.send(0, root, Slice(INPUT, 0, counts[rank]))
    return builder.build(problem, rank, "linear")


def binomial(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "binomial")
    tree = RootedTree(problem)
    counts = problem.counts
    builder = StepBuilder()
    vrank = tree.vrank(rank)
    if vrank == 0:
        copy_input_to_output(builder, counts[rank], out_offset=tree.offsets[rank])
        for k in range(ceil_log2(tree.n)):
            child = 1 << k
            if child < tree.n:
                for first, stop in tree.pieces(child, tree.end(child)):
                    dst = Slice(OUTPUT, tree.offsets[tree.real(first)], tree.span(first, stop))
                    builder.recv(k, tree.real(child), dst)
        return builder.build(problem, rank, "binomial")
    end = tree.end(vrank)
    level = lowbit(vrank)
    parent = tree.real(vrank - (1 << level))
    if end == vrank + 1:
        builder.send(level, parent, Slice(INPUT, 0, counts[rank]))
        return builder.build(problem, rank, "binomial")
    builder.copy(0, Slice(INPUT, 0, counts[rank]), Slice(SCRATCH, 0, counts[rank]))
    for k in range(level):
        child = vrank + (1 << k)
        if child < tree.n:
            first = tree.span(vrank, child)
            builder.recv(k, tree.real(child), Slice(SCRATCH, first, tree.span(child, tree.end(child))))
    # Only messages to the root are split at the wrap; the root splits its receives alike.
    ranges = tree.pieces(vrank, end) if parent == problem.root else [(vrank, end)]
    for first, stop in ranges:
        builder.send(level, parent, Slice(SCRATCH, tree.span(vrank, first), tree.span(first, stop)))
    return builder.build(problem, rank, "binomial", scratch=tree.span(vrank, end))

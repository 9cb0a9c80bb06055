"""Scatter: block r of the root's input (counts[r] elements, rank order) lands in rank r's output.

Linear. In step 0 the root sends every other rank its block and copies its
own; every other rank receives straight into its output. Cost: 1 step; the
root sends T - counts[root] elements (T = sum(counts)) in n - 1 messages;
nothing is reduced.

Binomial tree, the gather tree run backwards. Ranks are renumbered relative
to the root (vrank v = (rank - root) mod n), and vrank v's subtree is the
range [v, v + 2**lowbit(v)). With L = ceil(log2 n) rounds, in step L - 1 - k a
vrank that is a multiple of 2**(k+1) sends the blocks of vranks
[v + 2**k, v + 2**(k+1)) to that child, so the root first hands off the
largest half. Inner ranks receive their subtree into scratch laid out in
vrank order, copy their own block to output and forward the rest; leaves
receive straight into output. The root sends from its input, which is in rank
order, so a range that wraps past rank n-1 travels as two messages. Cost:
ceil(log2 n) steps; the root sends T - counts[root] elements in about
ceil(log2 n) messages; each inner vrank forwards its subtree minus its own
block; nothing is reduced.
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
    check_collective(problem, "scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "linear")
    counts, root = problem.counts, problem.root
    offsets = problem.offsets()
    builder = StepBuilder()
    if rank == root:
        copy_input_to_output(builder, counts[root], in_offset=offsets[root])
        for peer in range(problem.nranks):
            if peer != root:
                builder.send(0, peer, Slice(INPUT, offsets[peer], counts[peer]))
    else:
        builder.recv(0, root, Slice(OUTPUT, 0, counts[rank]))
    return builder.build(problem, rank, "linear")


def binomial(problem: Problem, rank: int) -> Schedule:
    check_collective(problem, "scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "binomial")
    tree = RootedTree(problem)
    counts = problem.counts
    rounds = ceil_log2(tree.n)
    builder = StepBuilder()
    vrank = tree.vrank(rank)
    if vrank == 0:
        copy_input_to_output(builder, counts[rank], in_offset=tree.offsets[rank])
        for k in reversed(range(rounds)):
            child = 1 << k
            if child < tree.n:
                for first, stop in tree.pieces(child, tree.end(child)):
                    src = Slice(INPUT, tree.offsets[tree.real(first)], tree.span(first, stop))
                    builder.send(rounds - 1 - k, tree.real(child), src)
        return builder.build(problem, rank, "binomial")
    end = tree.end(vrank)
    level = lowbit(vrank)
    parent = tree.real(vrank - (1 << level))
    arrival = rounds - 1 - level
    if end == vrank + 1:
        builder.recv(arrival, parent, Slice(OUTPUT, 0, counts[rank]))
        return builder.build(problem, rank, "binomial")
    # Only messages from the root are split at the wrap; the root splits its sends alike.
    ranges = tree.pieces(vrank, end) if parent == problem.root else [(vrank, end)]
    for first, stop in ranges:
        builder.recv(arrival, parent, Slice(SCRATCH, tree.span(vrank, first), tree.span(first, stop)))
    builder.copy(arrival + 1, Slice(SCRATCH, 0, counts[rank]), Slice(OUTPUT, 0, counts[rank]))
    for k in reversed(range(level)):
        child = vrank + (1 << k)
        if child < tree.n:
            src = Slice(SCRATCH, tree.span(vrank, child), tree.span(child, tree.end(child)))
            builder.send(rounds - 1 - k, tree.real(child), src)
    return builder.build(problem, rank, "binomial", scratch=tree.span(vrank, end))

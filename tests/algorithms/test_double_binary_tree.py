"""The double binary tree: two valid trees, complementary leaves on even sizes, pipelined steps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshcomm.algorithms._build import ceil_log2
from meshcomm.algorithms.checker import check, cost
from meshcomm.algorithms.double_binary_tree import Tree, all_reduce, btree_height
from meshcomm.algorithms.problem import Problem


def reaches_the_root(tree: Tree, rank: int) -> bool:
    seen = set()
    while rank not in seen:
        seen.add(rank)
        parent = tree.parent(rank)
        if parent is None:
            return True
        rank = parent
    return False


@pytest.mark.parametrize("n", range(2, 130))
def test_both_trees_are_binary_trees_whose_children_agree_with_their_parents(n: int) -> None:
    for which in (0, 1):
        tree = Tree(n, which)
        roots = [r for r in range(n) if tree.parent(r) is None]
        assert len(roots) == 1
        for rank in range(n):
            children = tree.children(rank)
            assert len(children) <= 2 and len(set(children)) == len(children)
            assert all(tree.parent(child) == rank for child in children)
            assert reaches_the_root(tree, rank)
        assert sorted(c for r in range(n) for c in tree.children(r)) == sorted(set(range(n)) - set(roots))


@pytest.mark.parametrize("n", range(2, 130, 2))
def test_on_even_sizes_every_rank_is_a_leaf_in_exactly_one_tree(n: int) -> None:
    first, second = Tree(n, 0), Tree(n, 1)
    for rank in range(n):
        assert (first.children(rank) == []) != (second.children(rank) == []), rank


@pytest.mark.parametrize("n", range(2, 130))
def test_tree_depth_is_ceil_log2_n(n: int) -> None:
    assert btree_height(n) == ceil_log2(n)
    assert max(Tree(n, 1).depth(r) for r in range(n)) == btree_height(n)


def test_pipelined_steps_and_per_rank_bytes_on_even_size() -> None:
    n, count, segments = 8, 800, 8
    problem = Problem("all_reduce", n, (count,))
    for rank in range(n):
        summary = cost(all_reduce(problem, rank, segments=segments))
        assert summary["steps"] == 2 * ceil_log2(n) + segments - 1
        # Inner in one tree, leaf in the other: at most 2 m each way and m reduced.
        assert summary["elements_sent"] <= 2 * count and summary["elements_received"] <= 2 * count
        assert summary["elements_reduced"] <= count


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), count=st.integers(0, 60), segments=st.integers(1, 12), in_place=st.booleans())
def test_double_binary_tree_holds_for_any_segment_count(n: int, count: int, segments: int, in_place: bool) -> None:
    problem = Problem("all_reduce", n, (count,))
    check(problem, lambda p, rank: all_reduce(p, rank, segments=segments), in_place=in_place)


def test_segments_below_one_are_rejected() -> None:
    with pytest.raises(ValueError, match="segments must be >= 1, got 0"):
        all_reduce(Problem("all_reduce", 4, (8,)), 0, segments=0)

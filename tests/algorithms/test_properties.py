"""Property tests: any counts and any root, every algorithm still computes its collective."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.checker import check
from meshcomm.algorithms.problem import IN_PLACE, ROOTED, Problem

SINGLE_COUNT = ("broadcast", "reduce", "all_reduce", "scan", "exscan")
PER_RANK = ("all_gather", "gather", "reduce_scatter", "scatter")
SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def problems(draw: st.DrawFn, collectives: tuple[str, ...]) -> Problem:
    collective = draw(st.sampled_from(collectives))
    n = draw(st.integers(1, 24))
    root = draw(st.integers(0, n - 1)) if collective in ROOTED else 0
    if collective in SINGLE_COUNT:
        counts: tuple[int, ...] = (draw(st.integers(0, 3 * n + 5)),)
    elif collective in PER_RANK:
        counts = tuple(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    elif collective == "all_to_all":
        n = min(n, 10)
        counts = tuple(draw(st.lists(st.integers(0, 3), min_size=n * n, max_size=n * n)))
    else:
        counts = ()
    return Problem(collective, n, counts, root)


@SETTINGS
@given(problem=problems(SINGLE_COUNT), in_place=st.booleans())
def test_single_count_algorithms_hold_for_any_count_root_and_aliasing(problem: Problem, in_place: bool) -> None:
    assert problem.collective in IN_PLACE
    for name in ALGORITHMS[problem.collective]:
        check(problem, name, in_place=in_place)


@SETTINGS
@given(problem=problems(PER_RANK))
def test_per_rank_algorithms_hold_for_any_uneven_counts_and_root(problem: Problem) -> None:
    for name in ALGORITHMS[problem.collective]:
        check(problem, name)


@SETTINGS
@given(problem=problems(("all_to_all", "barrier")))
def test_all_to_all_and_barrier_hold_for_any_matrix_and_size(problem: Problem) -> None:
    for name in ALGORITHMS[problem.collective]:
        check(problem, name)


@SETTINGS
@given(n=st.integers(1, 40), count=st.integers(0, 50), segments=st.integers(1, 12), root=st.integers(0, 39))
def test_chain_broadcast_holds_for_any_segment_count(n: int, count: int, segments: int, root: int) -> None:
    problem = Problem("broadcast", n, (count,), root % n)
    check(problem, lambda p, rank: ALGORITHMS["broadcast"]["chain"](p, rank, segments=segments), in_place=True)


@SETTINGS
@given(n=st.integers(1, 12), throttle=st.integers(1, 12), data=st.data())
def test_scattered_all_to_all_holds_for_any_throttle(n: int, throttle: int, data: st.DataObject) -> None:
    counts = tuple(data.draw(st.lists(st.integers(0, 3), min_size=n * n, max_size=n * n)))
    problem = Problem("all_to_all", n, counts)
    check(problem, lambda p, rank: ALGORITHMS["all_to_all"]["scattered"](p, rank, throttle=throttle))

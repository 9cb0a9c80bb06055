"""Hierarchical collectives: right on every host layout, and frugal with the links between hosts."""

from __future__ import annotations

import functools
import itertools

import pytest

from meshcomm.algorithms import get_schedule, hierarchical
from meshcomm.algorithms.checker import check
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Send

# Every way to put 1..5 ranks on up to 3 hosts (host indices in any order, so
# hosts interleave and number out of order), then some larger uneven ones.
LAYOUTS = [hosts for n in range(1, 6) for hosts in itertools.product(range(3), repeat=n)]
LAYOUTS += [(0,) * 5 + (1,) * 3 + (2,) * 8, tuple(r % 4 for r in range(16)), (1, 0) * 6 + (2,) * 3]
COUNTS = (0, 1, 2, 5, 16, 37)


@pytest.mark.parametrize("in_place", [False, True])
def test_hierarchical_all_reduce_is_right_on_every_host_layout(in_place: bool) -> None:
    for hosts in LAYOUTS:
        for count in COUNTS:
            check(Problem("all_reduce", len(hosts), (count,), hosts=hosts), "hierarchical", in_place=in_place)


@pytest.mark.parametrize("segments", [2, 3, 5])
def test_hierarchical_all_reduce_in_pipelined_segments_is_right_on_every_host_layout(segments: int) -> None:
    pipelined = functools.partial(hierarchical.all_reduce, segments=segments)
    for hosts in LAYOUTS:
        for count in COUNTS:
            check(Problem("all_reduce", len(hosts), (count,), hosts=hosts), pipelined, in_place=count % 2 == 1)


def test_a_large_buffer_across_hosts_is_pipelined_and_still_crosses_the_links_once() -> None:
    count = hierarchical.MAX_SEGMENTS * hierarchical.PIPELINE_ELEMENTS
    two_by_two = Problem("all_reduce", 4, (count,), hosts=(0, 0, 1, 1))
    one_host = Problem("all_reduce", 4, (count,))
    # 2 x 2: phase 1 takes 1 step, the ring 2, phase 3 1; each further segment adds one.
    assert len(get_schedule(two_by_two, 0, "hierarchical").steps) == 4 + hierarchical.MAX_SEGMENTS - 1
    assert len(get_schedule(one_host, 0, "hierarchical").steps) == 6  # one host: nothing to hide, no segments
    assert cross_host_elements(two_by_two, "hierarchical") == {0: count, 1: count}


@pytest.mark.parametrize(("collective", "unsegmented_steps"), [("all_gather", 2), ("reduce_scatter", 3)])
def test_large_blocks_across_hosts_are_pipelined_and_still_cross_the_links_once(collective: str,
                                                                                 unsegmented_steps: int) -> None:
    block = hierarchical.MAX_SEGMENTS * hierarchical.PIPELINE_ELEMENTS // 4
    problem = Problem(collective, 4, (block,) * 4, hosts=(0, 0, 1, 1))
    steps = {len(get_schedule(problem, rank, "hierarchical").steps) for rank in range(4)}
    assert steps == {unsegmented_steps + hierarchical.MAX_SEGMENTS - 1}
    assert cross_host_elements(problem, "hierarchical") == {0: 2 * block, 1: 2 * block}


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_segments_must_be_positive(collective: str) -> None:
    counts = (4,) if collective == "all_reduce" else (4, 4)
    with pytest.raises(ValueError, match="segments must be >= 1, got 0"):
        getattr(hierarchical, collective)(Problem(collective, 2, counts, hosts=(0, 1)), 0, segments=0)


def layout_problems(collective: str, hosts: tuple) -> list[Problem]:
    n = len(hosts)
    if collective == "broadcast":
        return [Problem(collective, n, (count,), root=root, hosts=hosts) for root in range(n) for count in (0, 7)]
    uneven = tuple((r * 3 + 1) % 4 for r in range(n))  # includes ranks with empty blocks
    return [Problem(collective, n, counts, hosts=hosts) for counts in (uneven, (5,) * n)]


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("segments", [2, 3])
def test_hierarchical_all_gather_and_reduce_scatter_in_segments_are_right_on_every_host_layout(
        collective: str, segments: int) -> None:
    pipelined = functools.partial(getattr(hierarchical, collective), segments=segments)
    for hosts in LAYOUTS:
        for problem in layout_problems(collective, hosts):
            check(problem, pipelined, in_place=False)
            check(problem, pipelined, in_place=True)


@pytest.mark.parametrize("collective", ["broadcast", "all_gather", "reduce_scatter"])
def test_hierarchical_rooted_and_gathering_algorithms_are_right_on_every_host_layout(collective: str) -> None:
    for hosts in LAYOUTS:
        for problem in layout_problems(collective, hosts):
            check(problem, "hierarchical", in_place=False)
            check(problem, "hierarchical", in_place=True)


def test_without_hosts_it_is_right_too() -> None:
    for n in range(1, 10):
        check(Problem("all_reduce", n, (23,)), "hierarchical")


def cross_host_elements(problem: Problem, algorithm: str) -> dict[int, int]:
    """Elements each host sends to other hosts, summed over its ranks."""
    sent: dict[int, int] = {}
    for rank in range(problem.nranks):
        for step in get_schedule(problem, rank, algorithm).steps:
            for op in step:
                if isinstance(op, Send) and problem.hosts[op.peer] != problem.hosts[rank]:
                    sent[problem.hosts[rank]] = sent.get(problem.hosts[rank], 0) + op.src.count
    return sent


@pytest.mark.parametrize(("hosts", "per_host"), [(2, 2), (2, 4), (4, 2), (3, 3)])
def test_each_host_puts_two_h_minus_one_over_h_of_the_buffer_on_its_link(hosts: int, per_host: int) -> None:
    count = 12 * 16 * hosts * per_host
    layout = tuple(r // per_host for r in range(hosts * per_host))
    problem = Problem("all_reduce", len(layout), (count,), hosts=layout)
    assert cross_host_elements(problem, "hierarchical") == {h: 2 * count * (hosts - 1) // hosts for h in range(hosts)}
    # The flat ring crosses a host boundary on every link that joins two hosts and
    # carries 2 m (n - 1) / n there: more than the hierarchical algorithm's share.
    ring = cross_host_elements(problem, "ring")
    assert all(ring[h] > 2 * count * (hosts - 1) // hosts for h in range(hosts))


def test_hosts_must_name_a_host_for_every_rank() -> None:
    with pytest.raises(ValueError, match="hosts must give a host index >= 0 for each of 3 ranks"):
        Problem("all_reduce", 3, (4,), hosts=(0, 1))


@pytest.mark.parametrize("collective", ["broadcast", "all_gather", "reduce_scatter"])
def test_hierarchical_algorithms_cross_each_link_with_the_least_data(collective: str) -> None:
    hosts, per_host, block = 3, 4, 10
    layout = tuple(r % hosts for r in range(hosts * per_host))  # hosts interleave in rank order
    n = len(layout)
    counts = (block * n,) if collective == "broadcast" else (block,) * n
    problem = Problem(collective, n, counts, root=5, hosts=layout)
    sent = cross_host_elements(problem, "hierarchical")
    if collective == "broadcast":
        # Every other host receives the buffer exactly once.
        assert sum(sent.values()) == (hosts - 1) * block * n
    else:
        # Each host sends the other hosts' share of its data once: (H - 1) host blocks, in ring order.
        assert sent == {h: (hosts - 1) * per_host * block for h in range(hosts)}


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_every_lane_of_a_host_carries_its_share_across(collective: str) -> None:
    # 3 hosts x 2 ranks: both ranks of each host send across, each (H - 1) of the blocks it speaks for.
    layout = (0, 0, 1, 1, 2, 2)
    problem = Problem(collective, 6, (10,) * 6, hosts=layout)
    across: dict[int, int] = {}
    for rank in range(6):
        for step in get_schedule(problem, rank, "hierarchical").steps:
            for op in step:
                if isinstance(op, Send) and layout[op.peer] != layout[rank]:
                    across[rank] = across.get(rank, 0) + op.src.count
    assert across == {rank: 2 * 10 for rank in range(6)}


def test_alike_hosts_forward_all_gather_blocks_while_the_ring_runs() -> None:
    # 2 hosts x 2 ranks: step 0 shares the own block inside the host and sends it across; step 1
    # forwards what came across. Hosts of different sizes wait one step for their members' blocks.
    alike = Problem("all_gather", 4, (5,) * 4, hosts=(0, 0, 1, 1))
    assert [len(get_schedule(alike, r, "hierarchical").steps) for r in range(4)] == [2] * 4
    uneven = Problem("all_gather", 5, (5,) * 5, hosts=(0, 0, 0, 1, 1))
    assert max(len(get_schedule(uneven, r, "hierarchical").steps) for r in range(5)) == 3

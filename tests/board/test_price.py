"""The board's price: one fixed cost plus the busiest rank's copies and reductions, only where the board runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.board.run import SLOT_BYTES, fits, slot_post_bytes
from meshcomm.tuner.model import DEFAULTS, Link, Parameters
from meshcomm.board.price import board_time
from meshcomm.tuner.predict import predict, replay

COPY_ONLY = Parameters(same_host=Link(1.0, 1.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=1.0, call=0.0,
                       crowded_alpha=1.0, board=0.0)
REDUCE_ONLY = Parameters(same_host=Link(1.0, 1.0), other_host=Link(1.0, 1.0), gamma=1.0, copy=0.0, call=0.0,
                         crowded_alpha=1.0, board=0.0)


def test_a_board_call_costs_its_fixed_cost_alone_when_nothing_moves() -> None:
    assert predict(Problem("barrier", 4, ()), "direct", 1, DEFAULTS, cores=4) == DEFAULTS.board


def test_the_busiest_rank_sets_the_byte_work() -> None:
    # all_reduce of m elements: publish m, read m, reduce (n - 1) m on every rank.
    m, n = 1000, 4
    assert predict(Problem("all_reduce", n, (m,)), "direct", 4, COPY_ONLY, cores=n) == 2 * m * 4
    assert predict(Problem("all_reduce", n, (m,)), "direct", 4, REDUCE_ONLY, cores=n) == (n - 1) * m * 4
    # broadcast: the root publishes m, every other rank reads m; nobody does both.
    assert predict(Problem("broadcast", n, (m,), root=2), "direct", 4, COPY_ONLY, cores=n) == m * 4
    # reduce_scatter: each rank publishes its peers' blocks of its input, copies its own block (from its
    # input) and reduces the peers' into it.
    counts = (10, 20, 30, 40)
    assert predict(Problem("reduce_scatter", n, counts), "direct", 1, REDUCE_ONLY, cores=n) == (n - 1) * 40
    assert predict(Problem("reduce_scatter", n, counts), "direct", 1, COPY_ONLY, cores=n) == (100 - 10) + 10
    # all_to_all: each rank publishes what it sends its peers and copies in all it receives, its own block too.
    swap = Problem("all_to_all", 2, (1, 5, 7, 2))  # rank 0 keeps 1, sends 5; rank 1 sends 7, keeps 2
    assert predict(swap, "direct", 1, COPY_ONLY, cores=2) == max(5 + (1 + 7), 7 + (5 + 2))


def test_ranks_outnumbering_cores_wake_a_rank_per_synchronisation_and_stretch_the_byte_work() -> None:
    problem = Problem("all_reduce", 8, (100,))
    spread = predict(problem, "direct", 4, DEFAULTS, cores=8)
    work = spread - DEFAULTS.board
    assert work > 0
    assert predict(problem, "direct", 4, DEFAULTS, cores=2) == DEFAULTS.crowded_alpha + 4 * work


def test_direct_is_priced_as_messages_off_the_board() -> None:
    too_big = Problem("all_reduce", 2, (slot_post_bytes("all_reduce") // 4 + 1,))
    in_slot = Problem("all_reduce", 2, (slot_post_bytes("all_reduce") // 4,))
    as_messages = replay([get_schedule(too_big, r, "direct") for r in range(2)], 4, DEFAULTS, cores=2)
    assert predict(too_big, "direct", 4, DEFAULTS, cores=2) == as_messages
    assert predict(in_slot, "direct", 4, DEFAULTS, [0, 0], cores=2) == board_time(in_slot, 4, DEFAULTS, cores=2)
    assert predict(in_slot, "direct", 4, DEFAULTS, [0, 1], cores=2) == \
        replay([get_schedule(in_slot, r, "direct") for r in range(2)], 4, DEFAULTS, [0, 1], cores=2)


def test_a_gathers_post_fills_a_slot_where_other_posts_stop_at_half() -> None:
    # A gather's members post while its root copies its own block: two copies through a slot beat one by
    # reference up to a whole slot (docs/board.md). The other collectives post up to SLOT_POST_BYTES.
    assert slot_post_bytes("gather") == SLOT_BYTES and slot_post_bytes("all_gather") == SLOT_BYTES // 2
    blocks = SLOT_BYTES // 4
    assert fits(Problem("gather", 2, (blocks, blocks), root=0), 4)
    assert not fits(Problem("gather", 2, (blocks + 1, blocks + 1), root=0), 4)
    assert not fits(Problem("all_gather", 2, (blocks, blocks)), 4)
    assert fits(Problem("all_gather", 2, (blocks // 2, blocks // 2)), 4)


PEER_BYTES_ONLY = Parameters(same_host=Link(0.0, 1.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=0.0, call=0.0,
                             crowded_alpha=1.0, board=0.0)
OWN_BYTES_ONLY = Parameters(same_host=Link(0.0, 0.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=1.0, call=0.0,
                            crowded_alpha=1.0, board=0.0)


def test_a_call_too_large_for_a_slot_is_priced_by_reference_when_ranks_read_each_other_s_memory() -> None:
    n, block = 4, slot_post_bytes("all_gather") // 4 + 1  # float32 blocks one element larger than a post in a slot
    gather = Problem("all_gather", n, (block,) * n)
    as_messages = replay([get_schedule(gather, r, "direct") for r in range(n)], 4, DEFAULTS, cores=n)
    assert predict(gather, "direct", 4, DEFAULTS, cores=n) == as_messages
    # Two synchronisations (post, then the readers' finish), nothing copied in.
    fixed_only = Parameters(same_host=Link(0.0, 0.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=0.0, call=0.0,
                            crowded_alpha=1.0, board=3.0)
    assert predict(gather, "direct", 4, fixed_only, cores=n, single_copy=True) == 2 * 3.0
    # Each rank reads the n - 1 other blocks from their owners' memory at same_host β, its own at the copy rate.
    assert predict(gather, "direct", 4, PEER_BYTES_ONLY, cores=n, single_copy=True) == (n - 1) * block * 4
    assert predict(gather, "direct", 4, OWN_BYTES_ONLY, cores=n, single_copy=True) == block * 4
    # A broadcast's readers each read the root's buffer once; the root copies nothing.
    root_only = Problem("broadcast", n, (4 * block,), root=1)
    assert predict(root_only, "direct", 4, PEER_BYTES_ONLY, cores=n, single_copy=True) == 4 * block * 4
    assert predict(root_only, "direct", 4, OWN_BYTES_ONLY, cores=n, single_copy=True) == 0.0
    # A slot-sized call is the same with or without it.
    small = Problem("all_gather", n, (10,) * n)
    assert predict(small, "direct", 4, DEFAULTS, cores=n, single_copy=True) == predict(small, "direct", 4, DEFAULTS,
                                                                                      cores=n)


def test_by_reference_the_model_picks_direct_for_mid_sized_calls_on_two_ranks() -> None:
    from meshcomm.tuner.choose import Chooser, canonical_problem

    model_only = replace(DEFAULTS, choices=())  # the defaults' measured rows overrule it for broadcast
    for collective in ("all_gather", "all_to_all", "broadcast", "reduce_scatter"):
        problem = canonical_problem(collective, 2, 1 << 21, 4)  # posts too large for a slot
        assert Chooser(model_only, 2, cores=2, single_copy=True).choose(problem, 4).name == "direct"
        assert Chooser(model_only, 2, cores=2).choose(problem, 4).name != "direct"


def test_the_defaults_broadcast_2_ranks_by_their_measured_rows() -> None:
    from meshcomm.tuner.choose import Chooser, canonical_problem

    chooser = Chooser(DEFAULTS, 2, cores=2, single_copy=True)
    chosen = {size: chooser.choose(canonical_problem("broadcast", 2, size, 4), 4).name
              for size in (8, 256 << 10, 512 << 10, (1 << 20) - 4, 1 << 20, 4 << 20, 8 << 20, 64 << 20)}
    assert chosen == {8: "direct", 256 << 10: "direct", 512 << 10: "direct", (1 << 20) - 4: "direct",
                      1 << 20: "binomial", 4 << 20: "binomial", 8 << 20: "direct", 64 << 20: "direct"}
    # other group sizes are the model's
    assert Chooser(DEFAULTS, 4, cores=2, single_copy=True).choose(
        canonical_problem("broadcast", 4, 1 << 20, 4), 4).how == "predicted"


@pytest.mark.parametrize("n", [4, 8])
def test_the_defaults_gather_among_more_ranks_than_cores_by_their_measured_rows(n: int) -> None:
    from meshcomm.tuner.choose import Chooser, canonical_problem

    chooser = Chooser(DEFAULTS, n, cores=2, single_copy=True)
    sizes = (1 << 10, 256 << 10, 1 << 20, 2 << 20, (4 << 20) - 4 * n, 4 << 20, (8 << 20) - 4 * n, 8 << 20, 64 << 20)
    chosen = {size: chooser.choose(canonical_problem("gather", n, size, 4), 4).name for size in sizes}
    # direct at every size: blocks in slots, and larger ones written by the members into the root's output
    assert chosen == {size: "direct" for size in sizes}
    # the model alone sends the middle sizes as messages
    assert Chooser(replace(DEFAULTS, choices=()), n, cores=2, single_copy=True).choose(
        canonical_problem("gather", n, 1 << 20, 4), 4).name == "linear"


def test_two_shot_is_priced_on_the_board_only_with_the_single_copy() -> None:
    problem = Problem("all_reduce", 3, (10,))
    as_messages = replay([get_schedule(problem, r, "two_shot") for r in range(3)], 4, DEFAULTS, cores=3)
    assert predict(problem, "two_shot", 4, DEFAULTS, cores=3) == as_messages
    assert predict(problem, "two_shot", 4, DEFAULTS, [0, 0, 1], cores=3, single_copy=True) == \
        replay([get_schedule(problem, r, "two_shot") for r in range(3)], 4, DEFAULTS, [0, 0, 1], cores=3)
    assert predict(problem, "two_shot", 4, DEFAULTS, cores=3, single_copy=True) == \
        board_time(problem, 4, DEFAULTS, cores=3, algorithm="two_shot")


def test_two_shot_costs_two_synchronisations_and_a_block_read_and_written_per_peer() -> None:
    n, count = 4, 4001  # blocks of 1001 and 1000 elements: the largest sets the time
    problem = Problem("all_reduce", n, (count,))
    fixed_only = Parameters(same_host=Link(0.0, 0.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=0.0, call=0.0,
                            crowded_alpha=1.0, board=3.0)
    assert predict(problem, "two_shot", 4, fixed_only, cores=n, single_copy=True) == 2 * 3.0
    assert predict(problem, "two_shot", 4, PEER_BYTES_ONLY, cores=n, single_copy=True) == 2 * (n - 1) * 1001 * 4
    gamma_only = Parameters(same_host=Link(0.0, 0.0), other_host=Link(1.0, 1.0), gamma=1.0, copy=0.0, call=0.0,
                            crowded_alpha=1.0, board=0.0)
    assert predict(problem, "two_shot", 4, gamma_only, cores=n, single_copy=True) == (n - 1) * 1001 * 4
    # On 2 cores, each synchronisation wakes ranks (crowded_alpha) and the byte work is stretched by 4 / 2.
    assert predict(problem, "two_shot", 4, fixed_only, cores=2, single_copy=True) == 2 * 3.0  # board > crowded_alpha
    crowded = Parameters(same_host=Link(0.0, 1.0), other_host=Link(1.0, 1.0), gamma=0.0, copy=0.0, call=0.0,
                         crowded_alpha=5.0, board=3.0)
    assert predict(problem, "two_shot", 4, crowded, cores=2, single_copy=True) == 2 * 5.0 + 2 * (2 * 3 * 1001 * 4)


def test_with_the_single_copy_the_model_takes_two_shot_for_large_all_reduces_and_direct_for_small_ones() -> None:
    from meshcomm.tuner.choose import Chooser, canonical_problem

    for n in (2, 4, 8):
        with_it = Chooser(DEFAULTS, n, cores=2, single_copy=True)
        without = Chooser(DEFAULTS, n, cores=2)
        for nbytes in (1 << 20, 64 << 20):
            problem = canonical_problem("all_reduce", n, nbytes, 4)
            assert with_it.choose(problem, 4).name == "two_shot"
            assert without.choose(problem, 4).name != "two_shot"
        assert with_it.choose(canonical_problem("all_reduce", n, 8 << 10, 4), 4).name == "direct"

"""The board's price: one fixed cost plus the busiest rank's copies and reductions, only where the board runs."""

from __future__ import annotations

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.executor.board import SLOT_BYTES
from meshcomm.tuner.model import DEFAULTS, Link, Parameters
from meshcomm.tuner.board import board_time
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
    # reduce_scatter: each rank publishes its whole input and reduces its own block.
    counts = (10, 20, 30, 40)
    assert predict(Problem("reduce_scatter", n, counts), "direct", 1, REDUCE_ONLY, cores=n) == (n - 1) * 40


def test_ranks_outnumbering_cores_stretch_a_board_call() -> None:
    problem = Problem("all_reduce", 8, (100,))
    assert predict(problem, "direct", 4, DEFAULTS, cores=2) == 4 * predict(problem, "direct", 4, DEFAULTS, cores=8)


def test_direct_is_priced_as_messages_off_the_board() -> None:
    too_big = Problem("all_reduce", 2, (SLOT_BYTES // 4 + 1,))
    fits = Problem("all_reduce", 2, (SLOT_BYTES // 4,))
    as_messages = replay([get_schedule(too_big, r, "direct") for r in range(2)], 4, DEFAULTS, cores=2)
    assert predict(too_big, "direct", 4, DEFAULTS, cores=2) == as_messages
    assert predict(fits, "direct", 4, DEFAULTS, [0, 0], cores=2) == board_time(fits, 4, DEFAULTS, cores=2)
    assert predict(fits, "direct", 4, DEFAULTS, [0, 1], cores=2) == \
        replay([get_schedule(fits, r, "direct") for r in range(2)], 4, DEFAULTS, [0, 1], cores=2)

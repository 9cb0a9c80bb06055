"""Twin algorithms: one program under several names, whose timings are pooled instead of compared."""

from __future__ import annotations

import statistics

from meshcomm.algorithms.problem import Problem
from meshcomm.tuner.twins import pooled, twins


def test_on_two_ranks_the_flat_all_gathers_are_one_program() -> None:
    # On one host the hierarchical all-gather is its in-host exchange: one message each way too.
    assert twins(Problem("all_gather", 2, (256, 256))) == [["ring", "recursive_doubling", "bruck", "hierarchical"],
                                                           ["direct"]]  # on the board: another program


def test_on_eight_ranks_they_differ() -> None:
    assert all(len(group) == 1 for group in twins(Problem("all_gather", 8, (256,) * 8)))


def test_on_one_host_hierarchical_broadcast_is_binomial() -> None:
    assert ["binomial", "hierarchical"] in twins(Problem("broadcast", 4, (1000,)))


def test_twins_share_the_statistic_of_all_their_samples() -> None:
    samples = {"ring": [3.0, 9.0], "bruck": [1.0], "hierarchical": [5.0]}
    groups = [["ring", "recursive_doubling", "bruck"], ["hierarchical"]]
    assert pooled(samples, groups, min) == {"ring": 1.0, "bruck": 1.0, "hierarchical": 5.0}
    assert pooled(samples, groups, statistics.median)["ring"] == 3.0

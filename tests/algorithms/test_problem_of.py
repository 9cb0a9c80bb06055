"""problem_of: one checked Problem per shape, and bad arguments raise on every call."""

from __future__ import annotations

import pytest

from meshcomm.algorithms.problem import Problem, problem_of


def test_equal_arguments_give_the_same_problem_and_others_their_own() -> None:
    first = problem_of("broadcast", 3, (5,), 1)
    assert problem_of("broadcast", 3, (5,), 1) is first and first == Problem("broadcast", 3, (5,), 1)
    others = [problem_of("broadcast", 3, (5,), 2), problem_of("broadcast", 3, (6,), 1),
              problem_of("broadcast", 4, (5,), 1), problem_of("reduce", 3, (5,), 1)]
    assert all(other is not first and other != first for other in others)


def test_bad_arguments_raise_every_time_after_a_good_problem_of_the_same_collective() -> None:
    problem_of("all_gather", 2, (1, 1))
    for _ in range(2):
        with pytest.raises(ValueError, match=r"root must be in \[0, 2\), got 2"):
            problem_of("all_gather", 2, (1, 1), 2)
        with pytest.raises(ValueError, match="all_gather on 2 ranks needs 2 counts, got 3"):
            problem_of("all_gather", 2, (1, 1, 1))

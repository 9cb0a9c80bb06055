"""cost() summarises one rank's schedule: steps, messages, elements sent, received, reduced, copied."""

from __future__ import annotations

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.checker import cost
from meshcomm.algorithms.problem import Problem


def test_ring_all_reduce_cost_is_two_n_minus_one_steps_and_twice_the_buffer_on_the_wire() -> None:
    n, count = 8, 800
    summary = cost(get_schedule(Problem("all_reduce", n, (count,)), 3, "ring"))
    assert summary["steps"] == 2 * (n - 1)
    assert summary["elements_sent"] == 2 * count * (n - 1) // n
    assert summary["elements_received"] == 2 * count * (n - 1) // n
    assert summary["elements_reduced"] == count * (n - 1) // n
    assert summary["elements_copied"] == count
    assert summary["messages_sent"] == 2 * (n - 1)


def test_binomial_broadcast_root_sends_log_n_messages() -> None:
    summary = cost(get_schedule(Problem("broadcast", 16, (10,), root=5), 5, "binomial"))
    assert summary["steps"] == 4
    assert summary["messages_sent"] == 4
    assert summary["elements_sent"] == 40
    assert summary["elements_received"] == 0


def test_barrier_moves_messages_but_no_elements() -> None:
    summary = cost(get_schedule(Problem("barrier", 9, ()), 0))
    assert summary["steps"] == 4
    assert summary["messages_sent"] == summary["messages_received"] == 4
    assert summary["elements_sent"] == 0


def test_pairwise_all_to_all_takes_n_minus_one_steps() -> None:
    n = 5
    summary = cost(get_schedule(Problem("all_to_all", n, tuple([3] * n * n)), 2))
    assert summary["steps"] == n - 1
    assert summary["elements_sent"] == summary["elements_received"] == 3 * (n - 1)

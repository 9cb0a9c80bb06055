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


def test_rabenseifner_all_reduce_moves_ring_bytes_in_logarithmic_steps() -> None:
    n, count = 8, 800
    summary = cost(get_schedule(Problem("all_reduce", n, (count,)), 5, "rabenseifner"))
    assert summary["steps"] == 2 * 3
    assert summary["elements_sent"] == summary["elements_received"] == 2 * count * (n - 1) // n
    assert summary["elements_reduced"] == count * (n - 1) // n


def test_rabenseifner_all_reduce_fold_costs_two_extra_steps_and_a_whole_buffer() -> None:
    problem = Problem("all_reduce", 6, (600,))
    kept, folded = (cost(get_schedule(problem, rank, "rabenseifner")) for rank in (0, 1))
    assert kept["steps"] == 2 * 2 + 2
    assert kept["elements_sent"] == 2 * 600 * 3 // 4 + 600
    assert folded["elements_sent"] == folded["elements_received"] == 600
    assert folded["elements_reduced"] == 0


def test_scatter_broadcasts_root_sends_about_twice_the_buffer_not_log_n_times() -> None:
    n, count = 8, 800
    for name, steps in (("scatter_ring", 3 + n - 1), ("scatter_recursive_doubling", 2 * 3)):
        root = cost(get_schedule(Problem("broadcast", n, (count,), root=2), 2, name))
        assert root["steps"] == steps
        assert root["elements_sent"] == 2 * count * (n - 1) // n


def test_bruck_all_to_all_sends_one_packed_message_per_round() -> None:
    n = 8
    summary = cost(get_schedule(Problem("all_to_all", n, tuple([10] * n * n)), 3, "bruck"))
    assert summary["messages_sent"] == summary["messages_received"] == 3
    assert summary["elements_sent"] == 10 * (n // 2) * 3


def test_scattered_all_to_all_runs_throttle_exchanges_per_step() -> None:
    n = 64
    summary = cost(get_schedule(Problem("all_to_all", n, tuple([1] * n * n)), 0, "scattered"))
    assert summary["steps"] == 2
    assert summary["messages_sent"] == n - 1


def test_tree_barrier_sends_two_messages_per_non_root_rank() -> None:
    problem = Problem("barrier", 9, ())
    summaries = [cost(get_schedule(problem, rank, "tree")) for rank in range(9)]
    assert sum(s["messages_sent"] for s in summaries) == 2 * (9 - 1)
    assert all(s["steps"] <= 2 * 4 for s in summaries)


def test_recursive_algorithms_take_log_steps_on_powers_of_two() -> None:
    n = 16
    for collective, name in (("all_gather", "recursive_doubling"), ("all_gather", "bruck"),
                             ("reduce_scatter", "recursive_halving")):
        summary = cost(get_schedule(Problem(collective, n, tuple([4] * n)), 7, name))
        assert summary["steps"] == 4, name
        assert summary["elements_sent"] == 4 * (n - 1), name

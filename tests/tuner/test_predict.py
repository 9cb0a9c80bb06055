"""The predictor on hand-built parameters: each term of the model moves the time the way its definition says."""

from __future__ import annotations

from dataclasses import replace

import pytest

from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Copy, Recv, Schedule, Send, Slice
from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.model import DEFAULTS, Link, Parameters
from meshcomm.tuner.predict import predict, replay


def params(alpha: float = 0.0, beta: float = 0.0, gamma: float = 0.0, copy: float = 0.0,
           other: Link | None = None, crowded_alpha: float | None = None) -> Parameters:
    same = Link(alpha, beta)
    # The board never wins here: these tests are about messages (test_board_cost.py prices the board).
    return Parameters(same_host=same, other_host=other or same, gamma=gamma, copy=copy, call=0.0,
                      crowded_alpha=alpha if crowded_alpha is None else crowded_alpha, board=float("inf"))


LATENCY_ONLY = params(alpha=1.0)
BANDWIDTH_ONLY = params(beta=1.0)


def test_latency_only_model_counts_the_messages_on_the_critical_path() -> None:
    problem = Problem("all_reduce", 8, (1 << 16,))
    assert predict(problem, "ring", 4, LATENCY_ONLY, cores=8) == 2 * (8 - 1)
    assert predict(problem, "recursive_doubling", 4, LATENCY_ONLY, cores=8) == 3


@pytest.mark.parametrize("nbytes", [8, 64 << 10, 64 << 20])
def test_latency_only_model_picks_the_fewest_steps_at_every_size(nbytes: int) -> None:
    chooser = Chooser(LATENCY_ONLY, 8)
    assert chooser.choose(Problem("all_reduce", 8, (nbytes // 4,)), 4).name == "recursive_doubling"


def test_bandwidth_only_model_charges_ring_its_two_n_minus_one_over_n_bytes() -> None:
    n, nbytes = 4, 4 << 20
    ring = predict(Problem("all_reduce", n, (nbytes // 4,)), "ring", 4, BANDWIDTH_ONLY, cores=n)
    assert ring == 2 * (n - 1) / n * nbytes


def test_bandwidth_only_model_picks_an_algorithm_that_sends_the_fewest_bytes() -> None:
    chooser = Chooser(BANDWIDTH_ONLY, 4)
    choice = chooser.choose(Problem("all_reduce", 4, ((4 << 20) // 4,)), 4)
    assert choice.name in ("ring", "rabenseifner")
    assert choice.seconds == min(choice.times.values()) < choice.times["recursive_doubling"]


def crossover(parameters: Parameters) -> int:
    """The smallest power-of-two size at which 4-rank all_reduce leaves recursive doubling."""
    chooser = Chooser(parameters, 4)
    for power in range(3, 30):
        if chooser.choose(Problem("all_reduce", 4, ((1 << power) // 4,)), 4).name != "recursive_doubling":
            return 1 << power
    raise AssertionError("recursive doubling wins at every size")


def test_ring_tree_crossover_moves_up_with_latency_and_down_with_cost_per_byte() -> None:
    base = crossover(params(alpha=30e-6, beta=0.3e-9, gamma=0.15e-9))
    assert 8 < base < 64 << 20
    assert crossover(params(alpha=300e-6, beta=0.3e-9, gamma=0.15e-9)) > base
    assert crossover(params(alpha=30e-6, beta=3e-9, gamma=0.15e-9)) < base


def test_messages_to_another_host_cost_that_link_class() -> None:
    problem = Problem("all_reduce", 4, (1 << 18,))
    penalised = params(alpha=10e-6, beta=0.3e-9, other=Link(100e-6, 1e-9))
    two_hosts = ["a", "a", "b", "b"]
    assert predict(problem, "ring", 4, penalised, two_hosts, cores=4) > predict(problem, "ring", 4, penalised, cores=4)
    same_everywhere = params(alpha=10e-6, beta=0.3e-9)
    assert predict(problem, "ring", 4, same_everywhere, two_hosts, cores=4) == \
        predict(problem, "ring", 4, same_everywhere, cores=4)


def test_ranks_outnumbering_cores_stretch_the_steps_they_act_in() -> None:
    problem = Problem("all_reduce", 4, (1 << 18,))
    assert predict(problem, "ring", 4, BANDWIDTH_ONLY, cores=1) == 4 * predict(problem, "ring", 4, BANDWIDTH_ONLY,
                                                                                cores=4)
    assert predict(problem, "ring", 4, BANDWIDTH_ONLY, cores=2) == 2 * predict(problem, "ring", 4, BANDWIDTH_ONLY,
                                                                                cores=4)


def test_ranks_outnumbering_cores_pay_the_crowded_message_cost() -> None:
    problem = Problem("all_reduce", 4, (4,))
    crowded = params(alpha=1.0, crowded_alpha=10.0)
    assert predict(problem, "recursive_doubling", 4, crowded, cores=4) == 2 * 1.0
    assert predict(problem, "recursive_doubling", 4, crowded, cores=2) == 2 * 10.0
    assert predict(problem, "recursive_doubling", 4, crowded, hosts=[0, 0, 1, 1], cores=2) == 1.0 + 1.0


def test_a_receive_waits_for_its_senders_clock() -> None:
    # Rank 0 copies 100 elements, then sends 10; rank 1 only receives: it ends when the message arrives.
    sender = Schedule("broadcast", "hand", 0, 2, steps=(
        (Copy(Slice("input", 0, 100), Slice("output", 0, 100)), Send(1, Slice("output", 0, 10))),))
    receiver = Schedule("broadcast", "hand", 1, 2, steps=((Recv(0, Slice("output", 0, 10)),),))
    parameters = params(alpha=5.0, beta=1.0, copy=2.0)
    assert replay([sender, receiver], 1, parameters, cores=2) == 100 * 2.0 + 5.0 + 10 * 1.0


def test_ranks_of_one_host_sending_across_at_once_share_its_link() -> None:
    # Ranks 0 and 1 (host a) each send 10 elements to host b in one step: the link carries 20.
    def sender(rank: int, peer: int) -> Schedule:
        return Schedule("broadcast", "hand", rank, 4, steps=((Send(peer, Slice("output", 0, 10)),),))

    def receiver(rank: int, peer: int) -> Schedule:
        return Schedule("broadcast", "hand", rank, 4, steps=((Recv(peer, Slice("output", 0, 10)),),))

    slow_link = params(beta=0.0, other=Link(0.0, 1.0))
    both = [sender(0, 2), sender(1, 3), receiver(2, 0), receiver(3, 1)]
    assert replay(both, 1, slow_link, ["a", "a", "b", "b"], cores=4) == 20.0
    idle = Schedule("broadcast", "hand", 1, 4, steps=((),))
    one = [sender(0, 2), idle, receiver(2, 0), Schedule("broadcast", "hand", 3, 4, steps=((),))]
    assert replay(one, 1, slow_link, ["a", "a", "b", "b"], cores=4) == 10.0
    # Two receivers on one host share its link too, even from two sending hosts.
    assert replay(both, 1, slow_link, ["a", "c", "b", "b"], cores=4) == 20.0


def test_across_hosts_a_tree_of_leaders_beats_a_binomial_tree_that_crosses_twice() -> None:
    # 2 hosts x 2 ranks: the binomial tree's second round sends 0 -> 2 and 1 -> 3 across at once.
    problem = Problem("broadcast", 4, (1 << 20,), root=0, hosts=(0, 0, 1, 1))
    slow_link = params(beta=0.01e-9, other=Link(0.0, 1e-9))
    hosts = ["a", "a", "b", "b"]
    binomial = predict(problem, "binomial", 4, slow_link, hosts, cores=4)
    hierarchical = predict(problem, "hierarchical", 4, slow_link, hosts, cores=4)
    assert binomial == pytest.approx(2 * hierarchical, rel=0.02)
    chooser = Chooser(slow_link, 4, hosts, cores=4, node_hosts=(0, 0, 1, 1))
    assert chooser.choose(problem, 4).name in ("hierarchical", "chain")


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_across_a_one_gigabit_link_the_hierarchical_algorithms_win_large_buffers(collective: str) -> None:
    # The built-in parameters with the other_host link measured across emulated 1 Gbit/s hosts.
    gigabit = replace(DEFAULTS, other_host=Link(60e-6, 8.3e-9))
    chooser = Chooser(gigabit, 4, ["a", "a", "b", "b"], cores=2, node_hosts=(0, 0, 1, 1))
    elements = (16 << 20) // 4
    counts = (elements,) if collective in ("all_reduce", "broadcast") else (elements // 4,) * 4
    choice = chooser.choose(Problem(collective, 4, counts, hosts=(0, 0, 1, 1)), 4)
    assert choice.name in ("hierarchical", "chain")  # chain: a broadcast's pipeline crosses once too
    assert choice.times["ring" if collective != "broadcast" else "binomial"] > 1.3 * choice.seconds


def test_hosts_must_label_every_rank() -> None:
    with pytest.raises(ValueError, match="hosts must label each of the 2 ranks, got 3"):
        predict(Problem("all_reduce", 2, (4,)), "ring", 4, LATENCY_ONLY, hosts=[0, 0, 1])

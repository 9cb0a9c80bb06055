"""The predictor on hand-built parameters: each term of the model moves the time the way its definition says."""

from __future__ import annotations

import pytest

from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Copy, Recv, Schedule, Send, Slice
from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.model import Link, Parameters
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


def test_hosts_must_label_every_rank() -> None:
    with pytest.raises(ValueError, match="hosts must label each of the 2 ranks, got 3"):
        predict(Problem("all_reduce", 2, (4,)), "ring", 4, LATENCY_ONLY, hosts=[0, 0, 1])

"""The automatic choice: cached per collective and size bucket, the same whatever the root or the call order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import Problem
from meshcomm.tuner import DEFAULTS, choose
from meshcomm.tuner.choose import Chooser, canonical_problem, size_bucket
from meshcomm.tuner.table import Measured


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list:
    calls: list = []
    real = choose.predict

    def counting(problem, name, *args, **kwargs):
        calls.append((problem.collective, name))
        return real(problem, name, *args, **kwargs)

    monkeypatch.setattr(choose, "predict", counting)
    return calls


def test_a_bucket_is_predicted_once_and_then_looked_up(counted: list) -> None:
    chooser = Chooser(DEFAULTS, 4, cores=2)
    first = chooser.choose(Problem("broadcast", 4, (1000,), root=0), 4)
    assert len(counted) == len(ALGORITHMS["broadcast"])
    again = chooser.choose(Problem("broadcast", 4, (1020,), root=3), 4)  # same power-of-two bucket, other root
    assert again is first and len(counted) == len(ALGORITHMS["broadcast"])
    chooser.choose(Problem("broadcast", 4, (5000,)), 4)
    assert len(counted) == 2 * len(ALGORITHMS["broadcast"])


def test_the_choice_does_not_depend_on_which_size_of_a_bucket_came_first() -> None:
    early, late = Chooser(DEFAULTS, 4, cores=2), Chooser(DEFAULTS, 4, cores=2)
    early.choose(Problem("all_reduce", 4, (1 << 18,)), 4)
    late.choose(Problem("all_reduce", 4, ((1 << 19) - 1,)), 4)
    assert early.choose(Problem("all_reduce", 4, ((1 << 19) - 1,)), 4) == \
        late.choose(Problem("all_reduce", 4, (1 << 18,)), 4)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "all_to_all", "scatter"])
def test_canonical_problem_carries_the_buckets_payload(collective: str) -> None:
    problem = canonical_problem(collective, 4, 1 << 20, 4)
    assert problem.payload_elements() * 4 == 1 << 20
    assert size_bucket(problem.payload_elements() * 4) == size_bucket(1 << 20)


def test_ties_go_to_the_registrys_first_algorithm() -> None:
    # On 2 ranks the four flat all_gather algorithms exchange the same single message
    # (the hierarchical one gathers to a leader first and is slower). Ranks that do not
    # share memory, so that `direct` goes as that message too, not on the board.
    choice = Chooser(DEFAULTS, 2, hosts=[0, 1], cores=2).choose(Problem("all_gather", 2, (1000, 1000)), 4)
    flat = [choice.times[name] for name in ("ring", "recursive_doubling", "bruck", "direct")]
    assert len(set(flat)) == 1 and min(choice.times.values()) == flat[0] and choice.name == "ring"


def test_cost_table_lists_every_algorithm_and_marks_the_fastest_per_size() -> None:
    lines = Chooser(DEFAULTS, 4, cores=2).table("all_reduce", 4)
    assert lines[0].split() == ["all_reduce", "8", "B", "1", "KiB", "64", "KiB", "1", "MiB", "16", "MiB", "64", "MiB"]
    assert [line.split()[0] for line in lines[1:]] == list(ALGORITHMS["all_reduce"])
    assert sum(line.count("*") for line in lines[1:]) == 6


def test_built_in_defaults_keep_the_stop_gap_rules_all_reduce_choices_at_its_extremes() -> None:
    # Fewest steps for the smallest messages (one synchronisation on the board when the ranks
    # share memory), a bandwidth-optimal algorithm for the largest.
    for n in (2, 4):
        chooser = Chooser(DEFAULTS, n, cores=2)
        assert chooser.choose(Problem("all_reduce", n, (2,)), 4).name == "direct"
        apart = Chooser(DEFAULTS, n, hosts=list(range(n)), cores=2)
        assert apart.choose(Problem("all_reduce", n, (2,)), 4).name == "recursive_doubling"
        assert chooser.choose(Problem("all_reduce", n, (16 << 20,)), 4).name in ("ring", "rabenseifner",
                                                                                  "double_binary_tree")


MEASURED = replace(DEFAULTS, choices=(Measured("all_reduce", 4, 8, "ring"),
                                       Measured("all_reduce", 4, 1 << 20, "binomial")))


def test_a_measured_choice_wins_over_the_model_and_says_so() -> None:
    predicted = Chooser(replace(DEFAULTS, choices=()), 4, cores=2).choose(Problem("all_reduce", 4, (2,)), 4)
    assert predicted.name != "ring" and predicted.how == "predicted"
    measured = Chooser(MEASURED, 4, cores=2).choose(Problem("all_reduce", 4, (2,)), 4)
    assert measured.name == "ring" and measured.how == "measured at 8 B"
    assert measured.seconds == measured.times["ring"]
    assert Chooser(MEASURED, 4, cores=2).choose(Problem("all_reduce", 4, (1 << 19,)), 4).how == "measured at 1 MiB"


def test_built_in_all_reduce_choices_take_two_shot_on_the_board_from_256_kib_16_kib_and_64_kib_on_2_4_8() -> None:
    for n, least in ((2, 256 << 10), (4, 16 << 10), (8, 64 << 10)):
        chooser = Chooser(DEFAULTS, n, cores=2, single_copy=True)
        below = chooser.choose(Problem("all_reduce", n, (least // 8,)), 4)
        at = chooser.choose(Problem("all_reduce", n, (least // 4,)), 4)
        assert (below.name, at.name) == ("direct", "two_shot") and at.how == f"measured at {least >> 10} KiB"
        assert chooser.choose(Problem("all_reduce", n, (64 << 20,)), 4).name == "two_shot"


def test_a_measured_choice_the_group_cannot_run_where_it_was_measured_is_left_to_the_model() -> None:
    # two_shot runs on the board only where the ranks read each other's memory; without that it would go as
    # messages, which the measured row never timed
    apart = Chooser(DEFAULTS, 2, cores=2, single_copy=False).choose(Problem("all_reduce", 2, (1 << 20,)), 4)
    assert apart.how == "predicted" and apart.name != "two_shot"
    # a broadcast's rows are of algorithms that run alike either way
    assert Chooser(DEFAULTS, 2, cores=2).choose(Problem("broadcast", 2, (1 << 20,)), 1).how == "measured at 1 MiB"


def test_the_model_decides_for_unmeasured_group_sizes_collectives_and_groups_across_hosts() -> None:
    assert Chooser(MEASURED, 8, cores=2).choose(Problem("all_reduce", 8, (2,)), 4).how == "predicted"
    assert Chooser(MEASURED, 4, cores=2).choose(Problem("broadcast", 4, (2,)), 4).how == "predicted"
    spread = Chooser(MEASURED, 4, hosts=["a", "a", "b", "b"], cores=2, node_hosts=(0, 0, 1, 1))
    assert spread.choose(Problem("all_reduce", 4, (2,), hosts=(0, 0, 1, 1)), 4).how == "predicted"

"""The default algorithm choice and the MESHCOMM_ALGO override."""

from __future__ import annotations

import pytest

from meshcomm.algorithms import ALGORITHMS, DEFAULT
from meshcomm.algorithms.choice import SMALL_BYTES, choose, parse_override
from meshcomm.algorithms.problem import Problem


def test_small_all_reduce_takes_fewest_steps_large_takes_the_default() -> None:
    small = Problem("all_reduce", 4, (SMALL_BYTES // 4,))
    large = Problem("all_reduce", 4, (SMALL_BYTES // 4 + 1,))
    assert choose(small, 4, DEFAULT) == "recursive_doubling"
    assert choose(large, 4, DEFAULT) == DEFAULT["all_reduce"]
    assert choose(Problem("broadcast", 4, (1,)), 4, DEFAULT) == DEFAULT["broadcast"]


def test_across_hosts_the_node_aware_algorithms_are_taken() -> None:
    count, hosts = SMALL_BYTES // 4 + 1, (0, 0, 1, 1)
    assert choose(Problem("all_reduce", 4, (count,), hosts=hosts), 4, DEFAULT) == "hierarchical"
    assert choose(Problem("all_reduce", 4, (4,), hosts=hosts), 4, DEFAULT) == "recursive_doubling"
    assert choose(Problem("broadcast", 4, (4,), hosts=hosts), 4, DEFAULT) == "hierarchical"
    assert choose(Problem("all_gather", 4, (4,) * 4, hosts=hosts), 4, DEFAULT) == DEFAULT["all_gather"]
    assert choose(Problem("gather", 4, (4,) * 4, hosts=hosts), 4, DEFAULT) == DEFAULT["gather"]
    assert choose(Problem("broadcast", 4, (count,)), 4, DEFAULT) == DEFAULT["broadcast"]


def test_override_by_bare_name_applies_to_every_collective_that_has_it() -> None:
    chosen = parse_override("ring", ALGORITHMS)
    assert chosen == {c: "ring" for c, names in ALGORITHMS.items() if "ring" in names}


def test_override_per_collective() -> None:
    assert parse_override(" all_reduce:recursive_doubling ; broadcast:chain ", ALGORITHMS) == {
        "all_reduce": "recursive_doubling",
        "broadcast": "chain",
    }
    assert parse_override("", ALGORITHMS) == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("all_reduce:bogus", "all_reduce has no algorithm 'bogus'"),
        ("allreduce:ring", "unknown collective 'allreduce'"),
        ("bogus", "'bogus': none of .* has an algorithm of that name"),
    ],
)
def test_bad_override_names_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_override(text, ALGORITHMS)


def chosen_schedule_names() -> list[str]:
    import numpy as np

    import meshcomm as dist
    from meshcomm.api.state import runtime

    problem = Problem("all_reduce", dist.get_world_size(), (2,))
    return [runtime().algorithm_for(problem, {"input": np.zeros(2, np.float32)})]


def test_runtime_reads_the_override_from_the_environment() -> None:
    from tests.cluster import Cluster

    cluster = Cluster(2, env={"MESHCOMM_ALGO": "all_reduce:ring"})
    try:
        assert cluster.run(chosen_schedule_names) == [["ring"], ["ring"]]
    finally:
        cluster.close()

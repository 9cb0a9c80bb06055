"""The MESHCOMM_ALGO override, and the runtime reading it."""

from __future__ import annotations

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.choice import parse_override
from meshcomm.algorithms.problem import Problem


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
    return [runtime().world.algorithm_for(problem, np.dtype(np.float32).itemsize)]


def test_runtime_reads_the_override_from_the_environment() -> None:
    from tests.ranks import Cluster

    cluster = Cluster(2, env={"MESHCOMM_ALGO": "all_reduce:ring"})
    try:
        assert cluster.run(chosen_schedule_names) == [["ring"], ["ring"]]
    finally:
        cluster.close()

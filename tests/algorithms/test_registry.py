"""The registry lists every collective's algorithms, picks defaults, and rejects unknown names."""

from __future__ import annotations

import importlib
import re

import pytest

import meshcomm.algorithms as algorithms
from meshcomm.algorithms import ALGORITHMS, DEFAULT, get_schedule
from meshcomm.algorithms.problem import COLLECTIVES, IN_PLACE, Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, Copy, Schedule, Slice

MODULES = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "gather", "scatter",
           "all_to_all", "barrier", "scan", "double_binary_tree", "direct")


def _problem(collective: str, n: int, root: int = 0) -> Problem:
    counts = {
        "barrier": (),
        "all_to_all": tuple([2] * (n * n)),
        **{c: tuple([3] * n) for c in ("all_gather", "gather", "reduce_scatter", "scatter")},
    }.get(collective, (5,))
    return Problem(collective, n, counts, root)


def test_public_names_are_exactly_the_registry() -> None:
    assert algorithms.__all__ == ["ALGORITHMS", "DEFAULT", "Algorithm", "get_schedule"]


def test_every_collective_has_algorithms_and_a_registered_default() -> None:
    assert set(ALGORITHMS) == set(COLLECTIVES) == set(DEFAULT)
    for collective, name in DEFAULT.items():
        assert name in ALGORITHMS[collective]


def test_algorithm_names_are_lowercase_snake_case() -> None:
    for names in ALGORITHMS.values():
        for name in names:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name


def test_get_schedule_uses_the_default_when_no_algorithm_is_named() -> None:
    problem = _problem("all_reduce", 4)
    assert get_schedule(problem, 2).algorithm == DEFAULT["all_reduce"]
    assert get_schedule(problem, 2, "recursive_doubling").algorithm == "recursive_doubling"


def test_unknown_algorithm_error_lists_the_valid_names() -> None:
    expected = r"unknown all_reduce algorithm 'foo'; choose one of: ring, recursive_doubling"
    with pytest.raises(ValueError, match=expected):
        get_schedule(_problem("all_reduce", 4), 0, "foo")


@pytest.mark.parametrize("rank", [-1, 4])
def test_rank_outside_the_group_is_rejected_naming_the_range(rank: int) -> None:
    with pytest.raises(ValueError, match=rf"rank must be in \[0, 4\), got {rank}"):
        get_schedule(_problem("broadcast", 4), rank)


def test_non_problem_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="problem must be a Problem"):
        get_schedule(("all_reduce", 4), 0)  # type: ignore[arg-type]


def test_algorithm_refuses_another_collectives_problem() -> None:
    with pytest.raises(ValueError, match="problem.collective must be one of"):
        ALGORITHMS["all_reduce"]["ring"](_problem("broadcast", 4), 0)


@pytest.mark.parametrize(("collective", "name"), [(c, a) for c, names in ALGORITHMS.items() for a in names])
def test_single_rank_schedule_only_copies_input_to_output(collective: str, name: str) -> None:
    problem = _problem(collective, 1)
    schedule = ALGORITHMS[collective][name](problem, 0)
    assert isinstance(schedule, Schedule)
    assert schedule.scratch == 0
    size = problem.output_count(0)
    if collective in ("barrier", "exscan"):
        assert schedule.steps == ()
    else:
        assert schedule.steps == ((Copy(Slice(INPUT, 0, size), Slice(OUTPUT, 0, size)),),)


@pytest.mark.parametrize(("collective", "name"), [(c, a) for c, names in ALGORITHMS.items() for a in names])
def test_schedules_are_plain_printable_data(collective: str, name: str) -> None:
    problem = _problem(collective, 5, root=2)
    for rank in range(5):
        schedule = ALGORITHMS[collective][name](problem, rank)
        assert schedule == ALGORITHMS[collective][name](problem, rank)
        assert str(schedule).startswith(f"{collective}/{name} rank {rank} of 5")


@pytest.mark.parametrize("collective", sorted(IN_PLACE))
def test_in_place_collectives_copy_input_before_anything_else(collective: str) -> None:
    problem = _problem(collective, 6, root=3)
    for name, fn in ALGORITHMS[collective].items():
        for rank in range(6):
            schedule = fn(problem, rank)
            reads = [op for step in schedule.steps for op in step if getattr(op, "src", None) and op.src.buf == INPUT]
            # Input is read only in step 0 (by a copy, or by a send before anything is written).
            for step in schedule.steps[1:]:
                assert not any(getattr(op, "src", None) and op.src.buf == INPUT for op in step), (name, rank)
            assert len(reads) <= 1, (name, rank)


@pytest.mark.parametrize("module", MODULES)
def test_algorithm_module_opens_with_prose_stating_its_cost(module: str) -> None:
    doc = importlib.import_module(f"meshcomm.algorithms.{module}").__doc__
    assert doc and len(doc.splitlines()) > 5
    assert "Cost" in doc and "steps" in doc


@pytest.mark.parametrize(("collective", "name"), [(c, a) for c, names in ALGORITHMS.items() for a in names])
def test_every_algorithm_is_explained_with_its_cost_in_its_module_or_its_own_docstring(collective: str,
                                                                                      name: str) -> None:
    fn = ALGORITHMS[collective][name]
    own = fn.__doc__ or ""
    module = importlib.import_module(fn.__module__).__doc__ or ""
    prose = own if "Cost" in own else module
    assert "Cost" in prose and "steps" in prose
    if not own:
        assert fn.__name__.replace("_", " ") in module.lower() or name.replace("_", " ") in module.lower()


def test_default_choice_is_unchanged_by_the_added_algorithms() -> None:
    assert DEFAULT == {
        "broadcast": "binomial", "reduce": "binomial", "all_reduce": "ring", "all_gather": "ring",
        "reduce_scatter": "ring", "gather": "binomial", "scatter": "binomial", "all_to_all": "pairwise",
        "barrier": "dissemination", "scan": "recursive_doubling", "exscan": "recursive_doubling",
    }

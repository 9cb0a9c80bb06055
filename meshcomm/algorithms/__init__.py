"""The algorithm registry: which schedules exist for each collective, and the one place that picks one."""

from __future__ import annotations

from typing import Callable

from meshcomm.algorithms import (
    all_gather,
    all_reduce,
    all_to_all,
    barrier,
    broadcast,
    direct,
    double_binary_tree,
    gather,
    hierarchical,
    reduce,
    reduce_scatter,
    scan,
    scatter,
)
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Schedule

__all__ = ["ALGORITHMS", "DEFAULT", "Algorithm", "get_schedule"]

Algorithm = Callable[[Problem, int], Schedule]

ALGORITHMS: dict[str, dict[str, Algorithm]] = {
    "broadcast": {
        "binomial": broadcast.binomial,
        "chain": broadcast.chain,
        "scatter_ring": broadcast.scatter_ring,
        "scatter_recursive_doubling": broadcast.scatter_recursive_doubling,
        "hierarchical": hierarchical.broadcast,
        "direct": direct.broadcast,
    },
    "reduce": {"binomial": reduce.binomial, "rabenseifner": reduce.rabenseifner, "direct": direct.reduce},
    "all_reduce": {
        "ring": all_reduce.ring,
        "recursive_doubling": all_reduce.recursive_doubling,
        "rabenseifner": all_reduce.rabenseifner,
        "binomial": all_reduce.binomial,
        "double_binary_tree": double_binary_tree.all_reduce,
        "hierarchical": hierarchical.all_reduce,
        "direct": direct.all_reduce,
        "two_shot": direct.two_shot,
    },
    "all_gather": {
        "ring": all_gather.ring,
        "recursive_doubling": all_gather.recursive_doubling,
        "bruck": all_gather.bruck,
        "hierarchical": hierarchical.all_gather,
        "direct": direct.all_gather,
    },
    "reduce_scatter": {
        "ring": reduce_scatter.ring,
        "recursive_halving": reduce_scatter.recursive_halving,
        "pairwise": reduce_scatter.pairwise,
        "hierarchical": hierarchical.reduce_scatter,
        "direct": direct.reduce_scatter,
    },
    "gather": {"linear": gather.linear, "binomial": gather.binomial, "direct": direct.gather},
    "scatter": {"linear": scatter.linear, "binomial": scatter.binomial, "direct": direct.scatter},
    "all_to_all": {"pairwise": all_to_all.pairwise, "bruck": all_to_all.bruck, "scattered": all_to_all.scattered,
                   "direct": direct.all_to_all},
    "barrier": {"dissemination": barrier.dissemination, "tree": barrier.tree, "direct": direct.barrier},
    "scan": {"linear": scan.linear, "recursive_doubling": scan.recursive_doubling},
    "exscan": {"linear": scan.linear, "recursive_doubling": scan.recursive_doubling},
}

DEFAULT: dict[str, str] = {
    "broadcast": "binomial",
    "reduce": "binomial",
    "all_reduce": "ring",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "gather": "binomial",
    "scatter": "binomial",
    "all_to_all": "pairwise",
    "barrier": "dissemination",
    "scan": "recursive_doubling",
    "exscan": "recursive_doubling",
}


def get_schedule(problem: Problem, rank: int, algorithm: str | None = None) -> Schedule:
    """Rank `rank`'s schedule for `problem`, by the named algorithm or the collective's default."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
    choices = ALGORITHMS[problem.collective]
    name = DEFAULT[problem.collective] if algorithm is None else algorithm
    if name not in choices:
        raise ValueError(
            f"unknown {problem.collective} algorithm {name!r}; choose one of: {', '.join(choices)}"
        )
    return choices[name](problem, rank)

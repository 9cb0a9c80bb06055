"""Twin algorithms: several names for one program, when their schedules coincide on every rank of a problem.

On 2 ranks, for instance, all_gather by ring, recursive doubling and Bruck
all exchange one message and nothing else, and on one host hierarchical
broadcast is binomial broadcast. The executor runs the steps, not the name,
so timings of twins are samples of the same thing: a difference between
them is noise, and a measured choice should not rest on it. Pooling their
samples gives each twin the same, better-founded time. `direct` and
`two_shot` are never twins: on one host, where tuning measures, they run on
the group's board, not as their schedules' messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from meshcomm.algorithms import ALGORITHMS, get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.board.run import ALGORITHMS as BOARD_ALGORITHMS


def twins(problem: Problem) -> list[list[str]]:
    """The problem's algorithms grouped by identical schedules (steps and scratch, every rank), in registry order."""
    groups: dict[tuple, list[str]] = {}
    for name in ALGORITHMS[problem.collective]:
        if name in BOARD_ALGORITHMS:
            groups[(name,)] = [name]
            continue
        schedules = (get_schedule(problem, rank, name) for rank in range(problem.nranks))
        groups.setdefault(tuple((s.steps, s.scratch) for s in schedules), []).append(name)
    return list(groups.values())


def pooled(samples: Mapping[str, Sequence[float]], groups: Sequence[Sequence[str]],
           statistic: Callable[[Sequence[float]], float]) -> dict[str, float]:
    """statistic() of each measured algorithm's samples together with its measured twins' samples."""
    times = {}
    for group in groups:
        together = [t for name in group for t in samples.get(name, ())]
        times.update({name: statistic(together) for name in group if name in samples})
    return times

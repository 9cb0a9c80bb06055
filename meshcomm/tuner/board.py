"""What a `direct` call costs when it runs on the group's shared-memory board.

There are no messages to replay: every rank publishes its contribution
once, waits for the others' (one synchronisation, `board`, the call's fixed
work included), then copies and reduces what it reads. The time is the
busiest rank's: board + (published + read) bytes x copy + reduced bytes x
γ. When the host runs more ranks than cores, every rank must be scheduled
for each call: the fixed cost and the byte work are stretched by ranks /
cores.
"""

from __future__ import annotations

from collections.abc import Sequence

from meshcomm.algorithms.problem import Problem
from meshcomm.executor import board as board_executor
from meshcomm.tuner.model import Parameters


def runs_on_board(problem: Problem, algorithm: str, itemsize: int, hosts: Sequence[object] | None) -> bool:
    """Whether the group runs this call on its board: `direct`, one shared-memory label, and it fits."""
    return algorithm == "direct" and (hosts is None or len(set(hosts)) == 1) and board_executor.fits(problem, itemsize)


def _read_and_reduced(problem: Problem, rank: int) -> tuple[int, int]:
    """Elements rank copies out of the board, and elements it reduces."""
    c, n = problem.collective, problem.nranks
    if c in ("all_reduce", "reduce"):
        if c == "reduce" and rank != problem.root:
            return 0, 0
        return problem.count, (n - 1) * problem.count
    if c == "reduce_scatter":
        return problem.counts[rank], (n - 1) * problem.counts[rank]
    if c == "broadcast":
        return (problem.count if rank != problem.root else 0), 0
    return problem.output_count(rank), 0  # all_gather, all_to_all; a barrier reads nothing


def board_time(problem: Problem, itemsize: int, parameters: Parameters, cores: int) -> float:
    stretch = max(1.0, problem.nranks / cores)
    busiest = 0.0
    for rank in range(problem.nranks):
        read, reduced = _read_and_reduced(problem, rank)
        published = board_executor.published_count(problem, rank)
        work = (published + read) * parameters.copy + reduced * parameters.gamma
        busiest = max(busiest, work * itemsize)
    return (parameters.board + busiest) * stretch

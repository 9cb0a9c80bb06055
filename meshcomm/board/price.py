"""What a `direct` or `two_shot` call costs when it runs on the group's shared-memory board.

There are no messages to replay: every rank publishes its contribution
(what its peers read of it) once, waits for the others' (one
synchronisation, `board`, the call's fixed work included), then copies and
reduces what it reads. The time is the busiest rank's: board + (published +
read) bytes x copy + reduced bytes x γ. When the host runs more ranks than
cores, every rank must be scheduled for each call: a synchronisation then
costs at least what waking a rank does (crowded_alpha, as a message's fixed
cost: a crowded host's board call costs many times an uncrowded one's;
benchmarks/results/design-figures-2026-11-25.md), and the byte work is
stretched by ranks / cores.

A call whose largest contribution does not fit a slot goes by reference
(when the ranks can read each other's memory), priced as if every member's
did (one whose post fits still copies it into its slot): nothing is copied
in, each byte a rank reads from a peer costs what a byte of a message
between ranks of one host costs (same_host β: it is the same one copy out
of the sender's memory), its own part is a local copy, and a second
synchronisation (the readers telling the posters they are done) adds
another `board`. A post staged on the board (segment.py: copied into the
poster's staging area and out by its readers) is priced the same way.

A two-shot all-reduce always goes by reference: two synchronisations, and
each rank reads its block (the largest of block_bounds') from n - 1 peers, reduces
them, and writes the result into n - 1 peers' outputs, every byte moved at
same_host β: the bytes of a ring, without its 2 (n - 1) messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import block_bounds
from meshcomm.board import run as board_executor

if TYPE_CHECKING:  # the tuner, above this layer, hands its parameters down
    from meshcomm.tuner.model import Parameters


def runs_on_board(problem: Problem, algorithm: str, itemsize: int, hosts: Sequence[object] | None,
                  single_copy: bool = False) -> bool:
    """Whether the group runs this call on its board: an algorithm it runs, one shared-memory label, and it fits."""
    return (algorithm in board_executor.ALGORITHMS and (hosts is None or len(set(hosts)) == 1)
            and board_executor.fits(problem, itemsize, single_copy, algorithm))


def _read_and_reduced(problem: Problem, rank: int) -> tuple[int, int]:
    """Elements rank copies into its output (out of the board's slots; its own block of an all_to_all,
    reduce_scatter, gather or scatter out of its input), and elements it reduces (straight from the slots)."""
    c, n = problem.collective, problem.nranks
    if c in ("all_reduce", "reduce"):
        if c == "reduce" and rank != problem.root:
            return 0, 0
        return problem.count, (n - 1) * problem.count
    if c == "reduce_scatter":
        return problem.counts[rank], (n - 1) * problem.counts[rank]
    if c == "broadcast":
        return (problem.count if rank != problem.root else 0), 0
    return problem.output_count(rank), 0  # all_gather, all_to_all, gather, scatter; a barrier reads nothing


def _read_by_reference(problem: Problem, rank: int, read: int, reduced: int) -> tuple[int, int]:
    """Of the elements rank reads in a call by reference (`read` and `reduced`, as _read_and_reduced gives
    them), those from its peers' memory and those of its own."""
    c = problem.collective
    if c == "all_gather" or (c == "gather" and rank == problem.root):
        own = problem.counts[rank]
    elif c == "scatter":
        own = problem.counts[rank] if rank == problem.root else 0
    elif c == "all_to_all":
        own = problem.matrix(rank, rank)
    elif reduced:  # a reduction reads every peer's part too, and copies its own (or the result) once
        return reduced, read
    else:
        own = 0
    return read - own, own


def board_time(problem: Problem, itemsize: int, parameters: Parameters, cores: int,
               algorithm: str = "direct") -> float:
    n = problem.nranks
    stretch = max(1.0, n / cores)
    synchronisation = max(parameters.board, parameters.crowded_alpha) if n > cores else parameters.board
    if algorithm == "two_shot":
        block = block_bounds(problem.count, n)[1]  # the largest: the first blocks take the remainder
        work = (2 * parameters.same_host.beta + parameters.gamma) * (n - 1) * block * itemsize
        return 2 * synchronisation + work * stretch
    by_reference = board_executor.goes_by_reference(problem, itemsize)
    busiest = 0.0
    for rank in range(n):
        read, reduced = _read_and_reduced(problem, rank)
        if by_reference:
            from_peers, own = _read_by_reference(problem, rank, read, reduced)
            work = from_peers * parameters.same_host.beta + own * parameters.copy
        else:
            work = (board_executor.published_count(problem, rank) + read) * parameters.copy
        busiest = max(busiest, (work + reduced * parameters.gamma) * itemsize)
    synchronisations = 2 if by_reference else 1
    return synchronisations * synchronisation + busiest * stretch

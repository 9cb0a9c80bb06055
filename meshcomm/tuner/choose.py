"""The automatic choice: per collective and power-of-two size bucket, the algorithm measured or predicted fastest.

A Chooser belongs to one group (its size and hosts are fixed), so a cached
choice is keyed by collective, size bucket and itemsize only; the root does
not enter (every algorithm costs the same from any root). Buckets are
predicted once, on a canonical problem of the bucket's lower bound (2^k
bytes, split evenly), so every rank of the group, whatever it called
before, picks the same algorithm for the same call. The hot path is one
dictionary lookup.

A tuning file's measured choices (tuner/table.py) win over the model for
the group sizes they were measured at, on groups of one host (they were
measured over shared memory), unless the group cannot run the choice as it
was measured: on the board by reference, where its ranks cannot read each
other's memory. The model decides everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import Problem
from meshcomm.board.price import runs_on_board
from meshcomm.tuner.model import Parameters
from meshcomm.tuner.predict import predict
from meshcomm.tuner.table import lookup, size_bucket

# Sizes of the cost table MESHCOMM_DEBUG=INFO prints.
TABLE_SIZES = (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
_ONE_COUNT = ("broadcast", "reduce", "all_reduce", "scan", "exscan")


def _size_label(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


class Choice(NamedTuple):
    name: str
    seconds: float
    nbytes: int  # the bucket's size the prediction is for
    times: dict  # every applicable algorithm -> predicted seconds
    how: str  # "measured at <size>" (a tuning file's table) or "predicted" (the model)


def canonical_problem(collective: str, nranks: int, nbytes: int, itemsize: int, hosts: tuple = ()) -> Problem:
    """The problem of `nbytes` of payload (nccl-tests' size) with every rank's share equal.

    `hosts` (a host index per rank, as groups spanning hosts put in their
    problems) lets node-aware algorithms be predicted as they will run.
    """
    elements = nbytes // itemsize
    least = 1 if elements else 0  # a bucket of calls that move something is not priced as one that moves nothing
    if collective == "barrier":
        counts: tuple = ()
    elif collective in _ONE_COUNT:
        counts = (elements,)
    elif collective == "all_to_all":
        counts = (max(least, elements // nranks**2),) * nranks**2
    else:
        counts = (max(least, elements // nranks),) * nranks
    return Problem(collective, nranks, counts, hosts=hosts)


class Chooser:
    def __init__(self, parameters: Parameters, nranks: int, hosts: Sequence[object] | None = None,
                 cores: int = 1, node_hosts: tuple = (), single_copy: bool = False) -> None:
        """`hosts` labels each rank's link class (shared memory or not); `node_hosts` is the
        group's host index per rank when it spans hosts (Problem.hosts), else (); `single_copy`: the
        group's ranks can read and write each other's memory (its board takes large posts by reference)."""
        self.parameters = parameters
        self.nranks = nranks
        self.hosts = None if hosts is None else tuple(hosts)
        self.cores = cores
        self.node_hosts = node_hosts
        self.single_copy = single_copy
        self._cache: dict[tuple[str, int, int], Choice] = {}

    def choose(self, problem: Problem, itemsize: int) -> Choice:
        key = (problem.collective, size_bucket(problem.payload_elements() * itemsize), itemsize)
        choice = self._cache.get(key)
        if choice is None:
            choice = self._cache[key] = self._predict_bucket(key)
        return choice

    def times(self, collective: str, nbytes: int, itemsize: int) -> dict[str, float]:
        """Predicted seconds of every algorithm of `collective` for a payload of nbytes."""
        problem = canonical_problem(collective, self.nranks, nbytes, itemsize, self.node_hosts)
        return {name: predict(problem, name, itemsize, self.parameters, self.hosts, self.cores, self.single_copy)
                for name in ALGORITHMS[collective]}

    def _predict_bucket(self, key: tuple[str, int, int]) -> Choice:
        collective, bucket, itemsize = key
        nbytes = 0 if bucket == 0 else 1 << (bucket - 1)
        times = self.times(collective, nbytes, itemsize)
        measured = lookup(self.parameters.choices, collective, self.nranks, nbytes) if self._one_host() else None
        if measured is not None and self._runs_as_measured(measured.algorithm, collective, nbytes, itemsize):
            return Choice(measured.algorithm, times[measured.algorithm], nbytes, times,
                          f"measured at {_size_label(measured.nbytes)}")
        # Ties go to the registry's order, which lists each collective's classic default first.
        name = min(times, key=times.__getitem__)
        return Choice(name, times[name], nbytes, times, "predicted")

    def _runs_as_measured(self, algorithm: str, collective: str, nbytes: int, itemsize: int) -> bool:
        """Whether this group runs `algorithm` where `meshcomm tune` measured it: on the board or off it, as a
        host whose ranks read each other's memory does (those that cannot send large calls as messages)."""
        problem = canonical_problem(collective, self.nranks, nbytes, itemsize, self.node_hosts)
        return (runs_on_board(problem, algorithm, itemsize, self.hosts, True)
                == runs_on_board(problem, algorithm, itemsize, self.hosts, self.single_copy))

    def _one_host(self) -> bool:
        return not self.node_hosts and (self.hosts is None or len(set(self.hosts)) <= 1)

    def table(self, collective: str, itemsize: int) -> list[str]:
        """Predicted µs of every algorithm at TABLE_SIZES, the fastest of each size marked with '*'."""
        columns = [self.times(collective, nbytes, itemsize) for nbytes in TABLE_SIZES]
        width = max(len(name) for name in ALGORITHMS[collective]) + 2
        lines = [f"{collective:<{width}}" + "".join(f"{_size_label(s):>12}" for s in TABLE_SIZES)]
        for name in ALGORITHMS[collective]:
            cells = []
            for times in columns:
                mark = "*" if min(times, key=times.__getitem__) == name else " "
                cells.append(f"{times[name] * 1e6:>11.0f}{mark}")
            lines.append(f"{name:<{width}}" + "".join(cells))
        return lines

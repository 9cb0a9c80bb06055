"""What a collective must compute: its buffers' sizes and, per rank, the counts.

A Problem is what every rank knows alike before a collective starts. Counts
are element counts; their meaning depends on the collective:

- broadcast, reduce, all_reduce, scan, exscan: (count,) — every rank's input
  and output hold `count` elements (reduce: output matters at the root only);
- all_gather, gather: counts[r] elements contributed by rank r; the output
  (all ranks / root) holds them concatenated in rank order;
- reduce_scatter, scatter: counts[r] elements end up on rank r; the input
  (all ranks / root) holds sum(counts) elements in rank order;
- all_to_all: the n*n matrix, row-major: counts[i*n + j] elements go from rank
  i to rank j; rank i's input is its row concatenated, rank j's output is its
  column concatenated (source order);
- barrier: () — no data.

`hosts`, when given, is the host index of each rank of the group (ranks with
equal indices share a host): node-aware algorithms read it, the others ignore
it. Empty means unknown, which they treat as one host.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcomm.algorithms.schedule import prefix_offsets

COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "gather",
    "scatter",
    "all_to_all",
    "barrier",
    "scan",
    "exscan",
)
ROOTED = ("broadcast", "reduce", "gather", "scatter")
REDUCING = ("reduce", "all_reduce", "reduce_scatter", "scan", "exscan")
# Collectives whose algorithms must also be right when input and output are
# the same buffer (torch's in-place tensors): they copy input to output first
# and never read input again.
IN_PLACE = ("broadcast", "reduce", "all_reduce", "scan", "exscan")
_SINGLE_COUNT = ("broadcast", "reduce", "all_reduce", "scan", "exscan")
_PER_RANK = ("all_gather", "gather", "reduce_scatter", "scatter")


@dataclass(frozen=True)
class Problem:
    collective: str
    nranks: int
    counts: tuple = ()
    root: int = 0
    hosts: tuple = ()

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ValueError(f"collective must be one of {COLLECTIVES}, got {self.collective!r}")
        if self.nranks < 1:
            raise ValueError(f"nranks must be >= 1, got {self.nranks}")
        if not 0 <= self.root < self.nranks:
            raise ValueError(f"root must be in [0, {self.nranks}), got {self.root}")
        c = self.collective  # checked on every call, so no table is built here
        expected = 1 if c in _SINGLE_COUNT else self.nranks if c in _PER_RANK else 0 if c == "barrier" else self.nranks**2
        if len(self.counts) != expected:
            raise ValueError(
                f"{self.collective} on {self.nranks} ranks needs {expected} counts, got {len(self.counts)}"
            )
        if any(int(c) < 0 for c in self.counts):
            raise ValueError(f"counts must be >= 0, got {self.counts}")
        if self.hosts and (len(self.hosts) != self.nranks or any(int(h) < 0 for h in self.hosts)):
            raise ValueError(f"hosts must give a host index >= 0 for each of {self.nranks} ranks, got {self.hosts}")

    @property
    def count(self) -> int:
        """The single count of broadcast/reduce/all_reduce/scan/exscan."""
        return self.counts[0]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def matrix(self, src: int, dst: int) -> int:
        """all_to_all: elements from src to dst."""
        return self.counts[src * self.nranks + dst]

    def offsets(self) -> list[int]:
        """Per-rank block offsets for the per-rank collectives."""
        return prefix_offsets(list(self.counts))

    def input_count(self, rank: int) -> int:
        c = self.collective
        if c in _SINGLE_COUNT:
            return self.count
        if c in ("all_gather", "gather"):
            return self.counts[rank]
        if c == "reduce_scatter":
            return self.total
        if c == "scatter":
            return self.total if rank == self.root else 0
        if c == "all_to_all":
            return sum(self.matrix(rank, j) for j in range(self.nranks))
        return 0

    def output_count(self, rank: int) -> int:
        c = self.collective
        if c in _SINGLE_COUNT:
            return self.count
        if c == "all_gather":
            return self.total
        if c == "gather":
            return self.total if rank == self.root else 0
        if c in ("reduce_scatter", "scatter"):
            return self.counts[rank]
        if c == "all_to_all":
            return sum(self.matrix(i, rank) for i in range(self.nranks))
        return 0

    def payload_elements(self) -> int:
        """The message size nccl-tests would report for this problem (elements)."""
        c = self.collective
        if c in _SINGLE_COUNT:
            return self.count
        if c == "all_to_all":
            return self.total
        if c == "barrier":
            return 0
        return self.total


_MADE: dict[tuple, Problem] = {}


def problem_of(collective: str, nranks: int, counts: tuple = (), root: int = 0) -> Problem:
    """Problem(collective, nranks, counts, root), one object for equal arguments.

    The faces describe every call with it: a problem's checks then run once
    per shape instead of on every call (a bad one raises each time, being
    never kept), and the group finds its plan for the call by identity.
    """
    key = (collective, nranks, counts, root)
    problem = _MADE.get(key)
    if problem is None:
        problem = Problem(collective, nranks, counts, root)
        if len(_MADE) >= 4096:  # many shapes: keep the newest, not all
            _MADE.clear()
        _MADE[key] = problem
    return problem

"""Message sizes, buffer layouts and bus bandwidth, by nccl-tests' conventions.

A size is what nccl-tests calls the message size: the larger of the send and
receive buffer of one rank, so for all_gather the *output* (count x ranks
elements) and for reduce_scatter the *input*. The per-rank element count is
derived from it the way nccl-tests' `*GetCollByteCount` functions do, and a
row reports max(send, receive) bytes, which is exactly what `--sizes` asked
for whenever the size divides evenly (nccl-tests' common.cu prints
`max(args->sendBytes, args->expectedBytes)`). nccl-tests additionally rounds
some counts to multiples of 4 or 16 bytes for GPU vector loads; CPU buffers
need no such rounding, so we do not.

    collective      count column (paramcount)   send        receive     algbw        bus factor
    all_reduce      S / elt                     count       count       S / t        2(n-1)/n
    broadcast       S / elt                     count       count       S / t        1
    reduce          S / elt                     count       count       S / t        1
    all_gather      S / elt / n                 count       count * n   S / t        (n-1)/n
    reduce_scatter  S / elt / n                 count * n   count       S / t        (n-1)/n
    all_to_all      S / elt / n                 count * n   count * n   S / t        (n-1)/n
    gather          S / elt / n                 count       count * n   S / t        (n-1)/n
    scatter         S / elt / n                 count * n   count       S / t        (n-1)/n
    pingpong        S / elt                     count       count       S / t        1

Sources (NVIDIA/nccl-tests, src/): all_reduce.cu `AllReduceGetBw` factor
2*(nranks-1)/nranks; broadcast.cu and reduce.cu factor 1; all_gather.cu,
reduce_scatter.cu, alltoall.cu, gather.cu and scatter.cu baseBw =
count*typesize*nranks/sec with factor (nranks-1)/nranks (older all_gather.cu
versions used count*(nranks-1) with factor 1, the same number). algbw is
bytes / time with 1 GB = 1e9 bytes, as there. `pingpong` is ours (rank 0 and 1
bounce one message, half a round trip is one transfer; nccl-tests' nearest is
sendrecv_perf, factor 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshcomm.algorithms.problem import Problem

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "gather",
    "scatter",
    "pingpong",
)
REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter"})
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# Collectives whose count column is a per-rank share of the size.
_SHARED = frozenset({"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"})

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8' -> 8, '1K' -> 1024, '64M' / '64MB' / '64MiB' -> 67108864 (binary units, as nccl-tests)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"size must be a number of bytes with an optional K/M/G suffix (e.g. 8, 1K, 64M), "
                         f"got {text!r}")
    value = int(match.group(1)) * UNITS[match.group(2).upper()]
    if value < 1:
        raise ValueError(f"size must be >= 1 byte, got {text!r}")
    return value


def parse_sizes(text: str) -> list[int]:
    """'8:64M' = 8, 16, 32, ... 64 MiB (doubling, both ends included); '8,1K,64M' = exactly those.

    Sizes come back sorted and without repeats.
    """
    text = text.strip()
    if not text:
        raise ValueError("sizes must not be empty; give MIN:MAX (e.g. 8:64M) or a list (e.g. 8,1K,64M)")
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 2:
            raise ValueError(f"a size range is MIN:MAX (e.g. 8:64M), got {text!r}")
        low, high = (parse_size(part) for part in parts)
        if low > high:
            raise ValueError(f"size range MIN:MAX needs MIN <= MAX, got {text!r} ({low} > {high})")
        sizes = []
        size = low
        while size <= high:
            sizes.append(size)
            size *= 2
        return sizes
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise ValueError(f"sizes must name at least one size (e.g. 8,1K,64M), got {text!r}")
    return sorted({parse_size(part) for part in parts})


def human_bytes(nbytes: int) -> str:
    """8 -> '8 B', 65536 -> '64 KiB', 3 MiB -> '3 MiB'; other values keep their bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for `collective` on `nranks` ranks (nccl-tests' factors, see the module docstring)."""
    _check(collective, nranks)
    if collective == "all_reduce":
        return 2 * (nranks - 1) / nranks
    if collective in _SHARED:
        return (nranks - 1) / nranks
    return 1.0


@dataclass(frozen=True)
class Layout:
    """The buffers of one (collective, size) point on one rank, in elements."""

    collective: str
    nranks: int
    itemsize: int
    count: int  # nccl-tests' count column: elements per call argument
    send_count: int
    recv_count: int

    @property
    def nbytes(self) -> int:
        """The row's size: the larger of the send and receive buffer."""
        return max(self.send_count, self.recv_count) * self.itemsize

    def algbw(self, seconds: float) -> float:
        """GB/s (1e9 bytes) of the row's size."""
        return self.nbytes / 1e9 / seconds if seconds > 0 else 0.0

    def busbw(self, seconds: float) -> float:
        return self.algbw(seconds) * bus_factor(self.collective, self.nranks)


def layout(collective: str, nbytes: int, nranks: int, itemsize: int) -> Layout:
    """How a requested size maps to counts for `collective` (count 0: too small for this many ranks)."""
    _check(collective, nranks)
    if nbytes < 0 or itemsize < 1:
        raise ValueError(f"nbytes must be >= 0 and itemsize >= 1, got {nbytes} and {itemsize}")
    elements = nbytes // itemsize
    if collective not in _SHARED:
        return Layout(collective, nranks, itemsize, elements, elements, elements)
    share = elements // nranks
    send = share * nranks if collective in ("reduce_scatter", "all_to_all", "scatter") else share
    recv = share * nranks if collective in ("all_gather", "all_to_all", "gather") else share
    return Layout(collective, nranks, itemsize, share, send, recv)


def problem(collective: str, nbytes: int, nranks: int, itemsize: int) -> Problem | None:
    """The Problem a bench row of `nbytes` runs (None: too small for this many ranks, the bench skips it).

    How measured times are matched to what the cost model and the chooser see.
    """
    lay = layout(collective, nbytes, nranks, itemsize)
    if lay.count == 0 or collective == "pingpong":
        return None
    if collective not in _SHARED:
        return Problem(collective, nranks, (lay.count,))
    if collective == "all_to_all":
        return Problem(collective, nranks, (lay.count,) * nranks**2)
    return Problem(collective, nranks, (lay.count,) * nranks)


def _check(collective: str, nranks: int) -> None:
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; choose from: {', '.join(COLLECTIVES)}")
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")

"""The schedule vocabulary: what one rank does, as plain printable data.

An algorithm is a pure function returning a Schedule for one rank. A schedule
is a tuple of steps; a step is a tuple of operations. Semantics of one step,
shared by the executor, the symbolic checker, the simulator and `explain`:

1. local operations (Copy, Reduce) run first, in the order listed;
2. then every communication operation (Send, Recv, RecvReduce) of the step is
   posted at once and the step ends when all have completed. Sends read their
   source when posted; a Recv writes its destination, a RecvReduce combines the
   received data into its destination (dst = op(dst, received)).

Within one step an algorithm must not let a receive's destination overlap a
send's source or another receive's destination. Messages between two ranks in
one step are matched in the order they are listed, so a sender lists its sends
to a peer in the same order as that peer lists its receives from the sender.

Buffers are named: "input" (the rank's contribution), "output" (the result),
"scratch" (temporary, `Schedule.scratch` elements). Offsets and counts are in
elements of the collective's dtype. Peers are ranks within the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

INPUT = "input"
OUTPUT = "output"
SCRATCH = "scratch"
BUFFERS = (INPUT, OUTPUT, SCRATCH)


@dataclass(frozen=True)
class Slice:
    buf: str
    offset: int
    count: int

    def __post_init__(self) -> None:
        if self.buf not in BUFFERS:
            raise ValueError(f"buffer must be one of {BUFFERS}, got {self.buf!r}")
        if self.offset < 0 or self.count < 0:
            raise ValueError(f"slice offset and count must be >= 0, got {self.offset}, {self.count}")

    @property
    def end(self) -> int:
        return self.offset + self.count

    def __str__(self) -> str:
        return f"{self.buf}[{self.offset}:{self.end}]"


@dataclass(frozen=True)
class Send:
    peer: int
    src: Slice

    def __str__(self) -> str:
        return f"send {self.src} -> {self.peer}"


@dataclass(frozen=True)
class Recv:
    peer: int
    dst: Slice

    def __str__(self) -> str:
        return f"recv {self.dst} <- {self.peer}"


@dataclass(frozen=True)
class RecvReduce:
    peer: int
    dst: Slice

    def __str__(self) -> str:
        return f"recv-reduce {self.dst} <- {self.peer}"


@dataclass(frozen=True)
class Copy:
    src: Slice
    dst: Slice

    def __post_init__(self) -> None:
        if self.src.count != self.dst.count:
            raise ValueError(f"copy needs equal counts, got {self.src} and {self.dst}")

    def __str__(self) -> str:
        return f"copy {self.src} -> {self.dst}"


@dataclass(frozen=True)
class Reduce:
    """Local reduction: dst = op(dst, src)."""

    src: Slice
    dst: Slice

    def __post_init__(self) -> None:
        if self.src.count != self.dst.count:
            raise ValueError(f"reduce needs equal counts, got {self.src} and {self.dst}")

    def __str__(self) -> str:
        return f"reduce {self.src} into {self.dst}"


Op = Union[Send, Recv, RecvReduce, Copy, Reduce]
LOCAL_OPS = (Copy, Reduce)
COMM_OPS = (Send, Recv, RecvReduce)
Step = tuple  # tuple[Op, ...]


@dataclass(frozen=True)
class Schedule:
    collective: str
    algorithm: str
    rank: int
    nranks: int
    steps: tuple = ()
    scratch: int = 0
    params: dict = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        lines = [f"{self.collective}/{self.algorithm} rank {self.rank} of {self.nranks}, scratch {self.scratch}"]
        for index, step in enumerate(self.steps):
            lines.append(f"  step {index}: " + "; ".join(str(op) for op in step))
        return "\n".join(lines)


def block_bounds(count: int, nblocks: int) -> list[int]:
    """Split `count` elements into `nblocks` contiguous blocks as evenly as possible.

    Returns nblocks+1 boundaries; the first `count % nblocks` blocks get one
    element more, so counts that do not divide evenly still work everywhere.
    """
    base, extra = divmod(count, nblocks)
    bounds = [0]
    for block in range(nblocks):
        bounds.append(bounds[-1] + base + (1 if block < extra else 0))
    return bounds


def prefix_offsets(counts: list[int]) -> list[int]:
    """Offsets of consecutive blocks with the given counts (len(counts)+1 entries)."""
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    return offsets

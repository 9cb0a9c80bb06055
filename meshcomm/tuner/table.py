"""Measured choices: the fastest algorithm `meshcomm tune --choices` timed per collective, group size and payload.

The cost model predicts; a table remembers what the clock said, which is
what MPICH's JSON tuning files and Open MPI's dynamic rules do. It matters
where the model is weakest: ranks that outnumber cores, rooted collectives
whose back-to-back calls overlap, and memory bandwidth shared by ranks
copying at once.

A choice measured at S payload bytes holds, as an Open MPI rule does, from
S's power-of-two bucket up to the next measured size (and below the
smallest one, whose small messages cost alike). A group size with no
measured choices has none: the model decides. Sizes are payload bytes as
`Problem.payload_elements()` counts them, the measure the chooser buckets by.

In a tuning file the table is {collective: {ranks: {payload bytes: algorithm}}}
(JSON keys are strings); in memory it is a sorted tuple of Measured rows, so
the parameters that carry it stay immutable and comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from meshcomm.algorithms import ALGORITHMS


class Measured(NamedTuple):
    collective: str
    nranks: int
    nbytes: int  # payload bytes of the measured call
    algorithm: str


def size_bucket(nbytes: int) -> int:
    """0 for 0 bytes, else k + 1 for 2^k <= nbytes < 2^(k+1)."""
    return nbytes.bit_length()


def lookup(choices: Iterable[Measured], collective: str, nranks: int, nbytes: int) -> Measured | None:
    """The row that governs a call of `nbytes` payload; None when this collective and group size were not measured."""
    rows = sorted(row for row in choices if row.collective == collective and row.nranks == nranks)
    if not rows:
        return None
    governing = rows[0]
    for row in rows[1:]:
        if size_bucket(row.nbytes) <= size_bucket(nbytes):
            governing = row
    return governing


def fastest(seconds: Mapping[tuple[str, int, int], Mapping[str, float]]) -> tuple[Measured, ...]:
    """One row per measured point {(collective, ranks, payload bytes): {algorithm: seconds}}: its fastest algorithm.

    Ties go to the registry's order, as the model's do.
    """
    rows = []
    for (collective, nranks, nbytes), times in seconds.items():
        order = list(ALGORITHMS[collective])
        name = min(times, key=lambda a: (times[a], order.index(a)))
        rows.append(Measured(collective, nranks, nbytes, name))
    return tuple(sorted(rows))


def to_raw(choices: Iterable[Measured]) -> dict:
    raw: dict = {}
    for row in sorted(choices):
        raw.setdefault(row.collective, {}).setdefault(str(row.nranks), {})[str(row.nbytes)] = row.algorithm
    return raw


def from_raw(raw: object, source: str) -> tuple[Measured, ...]:
    """Rows of a tuning file's "choices"; ValueError naming `source` and the bad entry."""
    where = f"tuning file {source}: choices"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object {{collective: {{ranks: {{bytes: algorithm}}}}}}, got {raw!r}")
    rows = []
    for collective, by_ranks in raw.items():
        if collective not in ALGORITHMS:
            raise ValueError(f"{where}: unknown collective {collective!r}; known: {', '.join(ALGORITHMS)}")
        if not isinstance(by_ranks, dict):
            raise ValueError(f"{where}: {collective} must map group sizes to {{bytes: algorithm}}, got {by_ranks!r}")
        for ranks, by_bytes in by_ranks.items():
            nranks = _count(ranks, f"{where}: {collective}: group size", minimum=2)
            if not isinstance(by_bytes, dict) or not by_bytes:
                raise ValueError(f"{where}: {collective} on {ranks} ranks must map bytes to an algorithm, "
                                 f"got {by_bytes!r}")
            for nbytes, algorithm in by_bytes.items():
                size = _count(nbytes, f"{where}: {collective} on {ranks} ranks: size", minimum=0)
                if algorithm not in ALGORITHMS[collective]:
                    raise ValueError(f"{where}: {collective} on {ranks} ranks at {nbytes} B names "
                                     f"unknown algorithm {algorithm!r}; choose one of: "
                                     f"{', '.join(ALGORITHMS[collective])}")
                rows.append(Measured(collective, nranks, size, algorithm))
    return tuple(sorted(rows))


def _count(text: str, what: str, minimum: int) -> int:
    if not text.isdigit() or int(text) < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {text!r}")
    return int(text)

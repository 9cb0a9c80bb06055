"""The problems every registered algorithm is checked on, and a count of them for reports."""

from __future__ import annotations

import random
from collections.abc import Iterator

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import IN_PLACE, ROOTED, Problem

SIZES = tuple(range(1, 34)) + (64,)
SINGLE_COUNT = ("broadcast", "reduce", "all_reduce", "scan", "exscan")
PER_RANK = ("all_gather", "gather", "reduce_scatter", "scatter")


def roots(n: int) -> list[int]:
    """Every root up to 12 ranks; beyond, the ends, the middle and a deterministic sample."""
    if n <= 12:
        return list(range(n))
    picks = {0, 1, n // 2, n - 1}
    picks.update(random.Random(n).sample(range(n), 2))
    return sorted(picks)


def single_counts(n: int) -> list[int]:
    """0, 1, fewer than n, a multiple of n, and counts that do not divide by n."""
    counts = {0, 1, max(n - 1, 1), 2 * n, 3 * n + 2}
    if n == 64:
        counts.add(100)
    return sorted(counts)


def per_rank_counts(n: int) -> list[tuple[int, ...]]:
    """All empty, all one element, uneven with zeros, and everything on one rank."""
    rng = random.Random(1000 + n)
    uneven = tuple(rng.choice((0, 0, 1, 2, 3, 5)) for _ in range(n))
    lonely = tuple(3 if r == n // 2 else 0 for r in range(n))
    return [tuple([0] * n), tuple([1] * n), uneven, lonely]


def matrix_counts(n: int) -> list[tuple[int, ...]]:
    rng = random.Random(2000 + n)
    uneven = tuple(rng.choice((0, 0, 1, 2)) for _ in range(n * n))
    return [tuple([0] * (n * n)), tuple([1] * (n * n)), uneven]


def problems(collective: str, n: int) -> Iterator[Problem]:
    """Every problem of one collective on n ranks that the exhaustive test checks."""
    if collective == "barrier":
        yield Problem(collective, n, ())
        return
    if collective == "all_to_all":
        for counts in matrix_counts(n):
            yield Problem(collective, n, counts)
        return
    options = [(c,) for c in single_counts(n)] if collective in SINGLE_COUNT else per_rank_counts(n)
    for counts in options:
        for root in roots(n) if collective in ROOTED else [0]:
            yield Problem(collective, n, counts, root)


def in_place_modes(collective: str) -> tuple[bool, ...]:
    return (False, True) if collective in IN_PLACE else (False,)


def coverage_table() -> dict[str, dict[str, int]]:
    """Per "collective/algorithm": sizes, distinct count vectors, (size, root) pairs, and checked cases."""
    table: dict[str, dict[str, int]] = {}
    for collective, algorithms in ALGORITHMS.items():
        counts: set[tuple[int, ...]] = set()
        roots_seen: set[tuple[int, int]] = set()
        cases = 0
        for n in SIZES:
            for problem in problems(collective, n):
                counts.add(problem.counts)
                roots_seen.add((n, problem.root))
                cases += len(in_place_modes(collective))
        for name in algorithms:
            table[f"{collective}/{name}"] = {
                "sizes": len(SIZES),
                "count_vectors": len(counts),
                "size_root_pairs": len(roots_seen),
                "cases": cases,
            }
    return table

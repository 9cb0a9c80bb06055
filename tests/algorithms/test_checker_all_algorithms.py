"""Every registered algorithm computes its collective on 1..33 and 64 ranks, per the symbolic checker."""

from __future__ import annotations

import pytest
from algorithm_cases import SIZES, coverage_table, in_place_modes, problems

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.checker import check

ALGORITHM_IDS = [(c, name) for c, algorithms in ALGORITHMS.items() for name in algorithms]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(("collective", "name"), ALGORITHM_IDS, ids=[f"{c}/{a}" for c, a in ALGORITHM_IDS])
def test_algorithm_computes_its_collective_for_every_count_and_root(collective: str, name: str, n: int) -> None:
    for problem in problems(collective, n):
        for in_place in in_place_modes(collective):
            check(problem, name, in_place=in_place)


def test_coverage_table_counts_every_algorithm_size_count_and_root(capsys: pytest.CaptureFixture[str]) -> None:
    table = coverage_table()
    assert set(table) == {f"{c}/{a}" for c, a in ALGORITHM_IDS}
    for row in table.values():
        assert row["sizes"] == len(SIZES)
        assert row["cases"] >= row["sizes"]
    rooted = table["gather/binomial"]
    # Every root on 1..12 ranks (78 pairs) plus at least 3 roots on each larger size.
    assert rooted["size_root_pairs"] >= 78 + 3 * (len(SIZES) - 12)
    with capsys.disabled():
        total = sum(row["cases"] for row in table.values())
        print(f"\nalgorithm coverage: {len(table)} algorithms, {total} checked cases")

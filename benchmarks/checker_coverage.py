"""Checker coverage table: every collective x algorithm x sizes x counts x roots the symbolic checker proves.

    python benchmarks/checker_coverage.py [--detail] [--only all_reduce/rabenseifner,...]

Runs exactly the cases of tests/algorithms/algorithm_cases.py (the ones the
test suite checks), so the table reports what the tests prove rather than a
second list that could drift from it. One row per algorithm: group sizes,
distinct count vectors, (size, root) pairs, in-place modes, checked cases,
time, and the result (ok, or the checker's first error). --detail adds one
line per algorithm and size listing the counts and roots checked there.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "algorithms"))

from algorithm_cases import SIZES, in_place_modes, problems  # noqa: E402

from meshcomm.algorithms import ALGORITHMS  # noqa: E402
from meshcomm.algorithms.checker import ScheduleError, check  # noqa: E402


def _short(counts: tuple[int, ...]) -> str:
    """A count vector in a few characters: the single count, or a summary of a per-rank vector."""
    if len(counts) == 1:
        return str(counts[0])
    if len(set(counts)) == 1:
        return f"[{counts[0]}]*{len(counts)}"
    return f"uneven(sum {sum(counts)}, {sum(1 for c in counts if c == 0)} zero)"


def check_algorithm(collective: str, name: str, detail: bool) -> dict[str, object]:
    count_vectors: set[tuple[int, ...]] = set()
    size_roots: set[tuple[int, int]] = set()
    cases = 0
    started = time.perf_counter()
    error = ""
    for n in SIZES:
        counts_here: list[str] = []
        roots_here: set[int] = set()
        for problem in problems(collective, n):
            count_vectors.add(problem.counts)
            size_roots.add((n, problem.root))
            roots_here.add(problem.root)
            if _short(problem.counts) not in counts_here:
                counts_here.append(_short(problem.counts))
            for in_place in in_place_modes(collective):
                cases += 1
                try:
                    check(problem, name, in_place=in_place)
                except ScheduleError as exc:
                    error = error or str(exc)
        if detail:
            print(f"    {collective}/{name} n={n}: counts {', '.join(counts_here) or '()'}; "
                  f"roots {sorted(roots_here)}")
    return {
        "sizes": len(SIZES),
        "count_vectors": len(count_vectors),
        "size_root_pairs": len(size_roots),
        "in_place_modes": len(in_place_modes(collective)),
        "cases": cases,
        "seconds": time.perf_counter() - started,
        "result": "ok" if not error else f"FAIL: {error}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detail", action="store_true", help="one line per algorithm and size")
    parser.add_argument("--only", default="", help="comma-separated collective/algorithm names")
    args = parser.parse_args(argv)
    wanted = {item.strip() for item in args.only.split(",") if item.strip()}
    sizes = f"{SIZES[0]}..{SIZES[-2]},{SIZES[-1]}"
    header = f"{'collective/algorithm':40} {'sizes':>10} {'counts':>7} {'n,root':>7} {'inplace':>7} " \
             f"{'cases':>6} {'time':>7}  result"
    print(header)
    print("-" * len(header))
    failures = total = 0
    for collective, algorithms in ALGORITHMS.items():
        for name in algorithms:
            label = f"{collective}/{name}"
            if wanted and label not in wanted:
                continue
            row = check_algorithm(collective, name, args.detail)
            total += row["cases"]
            failures += row["result"] != "ok"
            print(f"{label:40} {sizes:>10} {row['count_vectors']:>7} {row['size_root_pairs']:>7} "
                  f"{row['in_place_modes']:>7} {row['cases']:>6} {row['seconds']:>6.1f}s  {row['result']}")
    print(f"{total} cases checked, {failures} algorithm(s) failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

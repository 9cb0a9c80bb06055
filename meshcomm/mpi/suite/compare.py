"""python -m meshcomm.mpi.suite.compare MESHCOMM.json MPICH.json: the two runs' passes side by side.

Each file is one `python -m meshcomm.mpi.suite --json` report. For every
size both ran, it prints each file's pass/fail/skip counts on both, and
the share of MPICH's passes that meshcomm matches: the sum over files of
min(meshcomm passes, MPICH passes) over MPICH's passes. A file MPICH did
not finish in time is also counted a second, stricter way: as if MPICH
had passed as many of its tests as at its best size.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def _counts(cell: dict | None) -> str:
    if cell is None:
        return "-"
    late = " (out of time)" if _out_of_time(cell) else ""
    return f"{cell['pass']}/{cell['fail']}/{cell['skip']}{late}"


def _out_of_time(cell: dict | None) -> bool:
    return cell is not None and "did not finish" in cell.get("error", "")


def compare(ours: dict, theirs: dict) -> str:
    lines = []
    sizes = sorted({int(n) for row in ours.values() for n in row} & {int(n) for row in theirs.values() for n in row})
    for n in sizes:
        key = str(n)
        lines += [f"\n## N = {n}\n", "| file | meshcomm pass/fail/skip | MPICH pass/fail/skip |", "|---|---|---|"]
        matched = mpich = mine = strict_matched = strict_mpich = 0
        for name in sorted(set(ours) | set(theirs)):
            a, b = ours.get(name, {}).get(key), theirs.get(name, {}).get(key)
            lines.append(f"| {name} | {_counts(a)} | {_counts(b)} |")
            passed, theirs_passed = a["pass"] if a else 0, b["pass"] if b else 0
            mine += passed
            mpich += theirs_passed
            matched += min(passed, theirs_passed)
            if _out_of_time(b):
                theirs_passed = max(cell["pass"] for cell in theirs[name].values())
            strict_mpich += theirs_passed
            strict_matched += min(passed, theirs_passed)
        share = 100.0 * matched / mpich if mpich else 0.0
        strict = 100.0 * strict_matched / strict_mpich if strict_mpich else 0.0
        lines.append(f"\nmeshcomm passes {mine}, MPICH {mpich}; summed per file, min(meshcomm, MPICH) is "
                     f"{matched}: {share:.1f} % of MPICH's passes. Counting each file MPICH did not finish "
                     f"as passing its best size's tests: {strict_matched} of {strict_mpich}, {strict:.1f} %.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshcomm.mpi.suite.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("meshcomm", type=pathlib.Path, help="the --json report of the meshcomm run")
    parser.add_argument("mpich", type=pathlib.Path, help="the --json report of the --impl mpi4py run")
    options = parser.parse_args(argv)
    reports = [json.loads(path.read_text())["results"] for path in (options.meshcomm, options.mpich)]
    print(compare(*reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m meshcomm.mpi.suite.compare: the share of MPICH's passes, per size, counted both ways."""

from __future__ import annotations

import json
import sys

from tests.ranks import run_command


def _cell(passed: int, failed: int = 0, error: str = "") -> dict:
    return {"pass": passed, "fail": failed, "skip": 0, "failed": [], "error": error}


def test_the_share_is_min_per_file_over_mpichs_passes_and_a_late_file_counts_its_best_size(tmp_path) -> None:
    from meshcomm.mpi.suite.compare import compare

    ours = {"test_a": {"2": _cell(10), "4": _cell(10)}, "test_b": {"2": _cell(3, 2), "4": _cell(5)}}
    theirs = {"test_a": {"2": _cell(8), "4": _cell(0, 1, "did not finish within 240 s")},
              "test_b": {"2": _cell(5), "4": _cell(5)}}
    text = compare(ours, theirs)
    at_two, at_four = text.split("## N = 4")
    # N = 2: min(10, 8) + min(3, 5) = 11 of MPICH's 13.
    assert "min(meshcomm, MPICH) is 11: 84.6 %" in at_two and "11 of 13, 84.6 %" in at_two
    # N = 4: MPICH ran out of time on test_a, so the strict count takes its best size's 8 passes.
    assert "min(meshcomm, MPICH) is 5: 100.0 %" in at_four and "13 of 13, 100.0 %" in at_four
    assert "0/1/0 (out of time)" in at_four

    paths = []
    for name, results in (("ours", ours), ("theirs", theirs)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"results": results}))
    done = run_command([sys.executable, "-m", "meshcomm.mpi.suite.compare", *map(str, paths)], timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == text.strip(), done.stdout + done.stderr

"""Running one of this folder's multi-rank programs under `meshcomm run`: each rank prints "OK rank r of n"."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.ranks import run_command

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def run_program(name: str, nranks: int, timeout: float = 240) -> str:
    """Run tests/mpi/<name> on nranks ranks; assert it exits cleanly with every rank's OK line; its stdout."""
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--timeout", "60", str(HERE / name)]
    done = run_command(command, cwd=REPO, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    # Found in the whole text, not per line: two ranks' writes can land within one line.
    assert sorted(re.findall(r"OK (rank \d+ of \d+)", done.stdout)) == [f"rank {r} of {nranks}" for r in range(nranks)]
    return done.stdout

"""ULFM's calls after a real failure (tests/mpi/ulfm_program.py): revoke, Get_failed, Agree and Shrink."""

from __future__ import annotations

import re
import sys

import pytest

from tests.mpi.programs import HERE, REPO
from tests.ranks import run_command


@pytest.mark.timeout(150)
@pytest.mark.parametrize("nranks", [2, 4])
def test_survivors_revoke_agree_and_shrink_after_a_rank_is_killed(nranks: int) -> None:
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--timeout", "60", "--on-failure",
               "continue", str(HERE / "ulfm_program.py")]
    done = run_command(command, cwd=REPO, timeout=120)
    assert done.returncode == 0 and not done.timed_out, done.output[-4000:]
    survived = sorted(re.findall(r"SURVIVED (\d+) of (\d+)", done.stdout))
    assert survived == [(str(r), str(nranks)) for r in range(nranks - 1)], done.output[-4000:]
    assert f"carried on without lost rank(s) [{nranks - 1}]" in done.stderr, done.stderr

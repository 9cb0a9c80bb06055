"""tests/ranks.py keeps its promise: a process still running at its deadline is stopped and reaped."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.ranks import RankError, run_function, run_meshcomm, run_program

SLEEPER = """
import os, sys, time
print(f"pid={os.getpid()};", flush=True)
if os.environ["RANK"] == "1":
    time.sleep(60)
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "args", sys.argv[1:])
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pids_in(text: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"pid=(\d+);", text)]


def test_run_program_kills_and_reaps_a_rank_past_its_deadline(tmp_path) -> None:
    program = tmp_path / "sleeper.py"
    program.write_text(SLEEPER)
    started = time.monotonic()
    first, second = run_program(program, 2, ["x"], timeout=3)
    assert time.monotonic() - started < 30
    assert (first.returncode, first.timed_out) == (0, False)
    assert first.stdout.endswith("rank 0 of 2 args ['x']\n")
    assert (second.returncode, second.timed_out) == (-9, True)
    assert all(gone(pid) for pid in pids_in(first.stdout + second.stdout))


def test_run_command_stops_a_launcher_and_its_ranks_past_the_deadline(tmp_path) -> None:
    program = tmp_path / "sleeper.py"
    program.write_text(SLEEPER)
    done = run_meshcomm("run", "-n", "2", "--no-prefix", str(program), timeout=3)
    assert done.timed_out and done.returncode == 128 + 15, done.output  # the launcher's exit on SIGTERM
    pids = pids_in(done.stdout)
    assert len(pids) == 2 and all(gone(pid) for pid in pids)


def _answer(rank: int, size: int, hang: int | None) -> tuple[int, int]:
    if rank == hang:
        time.sleep(60)
    if rank == 2:
        raise ValueError("rank 2 refuses")
    return rank, size


def test_run_function_returns_every_rank_s_result_or_names_who_failed() -> None:
    assert run_function(_answer, 2, None) == [(0, 2), (1, 2)]
    with pytest.raises(RankError, match="rank 2 refuses") as failed:
        run_function(_answer, 3, None)
    assert set(failed.value.failures) == {2}
    started = time.monotonic()
    with pytest.raises(RankError, match="no answer within 3 s") as hung:
        run_function(_answer, 2, 1, timeout=3)
    assert set(hung.value.failures) == {1} and time.monotonic() - started < 30


"""MPI's dynamic processes: Spawn, Accept/Connect, Join and names (dynamic_program.py), and how long children live."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.mpi.programs import HERE, REPO, run_program
from tests.ranks import run_command


@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_spawned_jobs_ports_and_joined_sockets_move_data_by_mpis_rules(nranks: int) -> None:
    run_program("dynamic_program.py", nranks, timeout=150)


@pytest.mark.timeout(90)
def test_a_spawning_process_waits_at_exit_for_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-finished"
    done = run_command([sys.executable, str(HERE / "spawn_lifetime_program.py"), "wait", str(marker)], cwd=REPO,
                       timeout=60)
    assert done.returncode == 0 and not done.timed_out, done.output[-3000:]
    assert marker.read_text() == "done"  # written a second after the parent's last call


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.timeout(90)
def test_a_child_exits_when_the_process_that_spawned_it_dies(tmp_path: Path) -> None:
    pid_file = tmp_path / "child-pid"
    done = run_command([sys.executable, str(HERE / "spawn_lifetime_program.py"), "orphan", str(pid_file)], cwd=REPO,
                       timeout=60)
    assert done.returncode == -9, done.output[-3000:]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running(child):
        os.kill(child, 9)
        pytest.fail(f"spawned process {child} outlived its parent by 10 s (it sleeps 120 s)")

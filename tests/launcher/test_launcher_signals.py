"""SIGINT/SIGTERM to a launcher: forwarded to every rank, all of them reaped."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from tests.ranks import fresh_job_env, run_meshcomm, started

RANK = """
    import os, subprocess, time
    child = subprocess.Popen(["sleep", "30"])
    print(f"pids={os.getpid()},{child.pid};", flush=True)
    time.sleep(30)
"""


def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float) -> list[str]:
    """Lines from proc's stdout until `count` arrived; fails instead of blocking past `timeout`."""
    assert proc.stdout is not None
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while data.count(b"\n") < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"only got {data!r}"
            if selector.select(remaining):
                chunk = os.read(proc.stdout.fileno(), 4096)
                assert chunk, f"launcher closed stdout early: {data!r}"
                data += chunk
    return data.decode().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_launcher_stops_and_reaps_every_rank(
    sig: signal.Signals,
    script: Callable[[str, str], str],
    exists: Callable[[int], bool],
    running: Callable[[int], bool],
) -> None:
    path = script("rank.py", RANK)
    with started([sys.executable, "-m", "meshcomm", "run", "-n", "3", "--no-prefix", path],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        # Without prefixes the ranks' bytes may interleave, even within a line.
        text = "".join(read_lines(proc, 3, timeout=30))
        pids = [(int(rank), int(child)) for rank, child in re.findall(r"pids=(\d+),(\d+);", text)]
        assert len(pids) == 3, text
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig
    assert f"received {sig.name}" in err.decode()
    for rank_pid, grandchild_pid in pids:
        assert not exists(rank_pid), f"rank pid {rank_pid} left behind"
        # The grandchild's zombie belongs to whoever adopted it, not to the launcher.
        assert not running(grandchild_pid), f"grandchild pid {grandchild_pid} left running"


def test_launcher_whose_reader_went_away_ends_instead_of_draining_forever() -> None:
    endless = "while True: print('y' * 100)"
    with started([sys.executable, "-m", "meshcomm", "run", "-n", "2", "--", sys.executable, "-c", endless],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.read(1000)
        proc.stdout.close()  # like `| head` exiting
        _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert b"failed first" in err


STUBBORN_RANK = """
    import os, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, lambda *_: print("got SIGINT", flush=True))
    print(f"pid={os.getpid()};", flush=True)
    time.sleep(30)
"""


def test_second_ctrl_c_kills_ranks_without_waiting_for_the_grace_period(
    script: Callable[[str, str], str], exists: Callable[[int], bool]
) -> None:
    path = script("stubborn.py", STUBBORN_RANK)
    env = fresh_job_env({"MESHCOMM_KILL_GRACE": "600"})
    with started([sys.executable, "-m", "meshcomm", "run", "-n", "2", "--no-prefix", path],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        # Without prefixes the two ranks' bytes may interleave, even within a line.
        pids = [int(pid) for pid in re.findall(r"pid=(\d+);", "".join(read_lines(proc, 2, timeout=30)))]
        assert len(pids) == 2, pids
        proc.send_signal(signal.SIGINT)
        # Both ranks saw the forwarded SIGINT, so the launcher handled the first one.
        # (Without prefixes the two ranks' bytes may interleave within a line.)
        assert "".join(read_lines(proc, 2, timeout=30)) == "got SIGINT" * 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert not any(exists(pid) for pid in pids)


def test_bad_kill_grace_variable_is_a_clear_error(script: Callable[[str, str], str]) -> None:
    done = run_meshcomm("run", script("noop.py", "pass\n"), env=fresh_job_env({"MESHCOMM_KILL_GRACE": "-1"}),
                    timeout=60)
    assert done.returncode == 2
    assert "MESHCOMM_KILL_GRACE must be >= 0 seconds, got -1.0" in done.stderr

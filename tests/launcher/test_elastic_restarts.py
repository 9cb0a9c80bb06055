"""`meshcomm run --max-restarts K`: a failed job is stopped and started again, a new store generation each time."""

from __future__ import annotations

import re
import secrets
import sys
from pathlib import Path

import pytest

from tests.ranks import fresh_job_env, free_port, run_commands, run_meshcomm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"

ATTEMPTS = """
import os, sys
import meshcomm as dist
dist.init_process_group()
attempt = os.environ["MESHCOMM_RESTART_COUNT"]
print(f"attempt {attempt} torchelastic {os.environ['TORCHELASTIC_RESTART_COUNT']} rank {dist.get_rank()}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(int(sys.argv[1]) if int(attempt) < int(sys.argv[2]) else 0)
"""

# Rank 3 (the second host's second rank) fails on the first attempt, after the rendezvous: the first host's ranks
# learn it from their next collective, fail too, and both hosts' launchers restart.
TWO_HOSTS = """
import os, sys
import numpy as np
import meshcomm as dist
dist.init_process_group()
attempt = int(os.environ["MESHCOMM_RESTART_COUNT"])
if attempt == 0 and dist.get_rank() == 3:
    sys.exit(7)
x = np.ones(4)
dist.all_reduce(x)
print(f"attempt {attempt} rank {dist.get_rank()} sum {x[0]:g}", flush=True)
dist.destroy_process_group()
"""


def final_loss(output: str) -> str:
    found = re.findall(r"final loss (\S+) after", output)
    assert len(found) == 1, output
    return found[0]


@pytest.mark.timeout(120)
def test_the_elastic_example_resumes_from_its_checkpoint_and_ends_with_the_uninterrupted_loss(tmp_path) -> None:
    killed = run_meshcomm("run", "-n", "2", "--max-restarts", "1", str(EXAMPLE), "--checkpoint",
                          str(tmp_path / "killed.npz"), timeout=90)
    assert killed.returncode == 0, killed.stderr
    assert "rank 1 (local rank 1" in killed.stderr and "failed first: signal SIGKILL" in killed.stderr
    assert "restart 1 of 1 (MESHCOMM_RESTART_COUNT=1)" in killed.stderr
    assert "attempt 1 resumes at step 21" in killed.stdout
    whole = run_meshcomm("run", "-n", "2", str(EXAMPLE), "--checkpoint", str(tmp_path / "whole.npz"),
                         "--kill-at", "0", timeout=90)
    assert whole.returncode == 0, whole.stderr
    assert "restart" not in whole.stderr
    assert final_loss(killed.stdout) == final_loss(whole.stdout)


@pytest.mark.timeout(120)
def test_each_attempt_is_numbered_and_the_exit_code_is_the_last_attempts(tmp_path) -> None:
    program = tmp_path / "attempts.py"
    program.write_text(ATTEMPTS)
    failing = run_meshcomm("run", "-n", "2", "--max-restarts", "2", str(program), "3", "5", timeout=90)
    assert failing.returncode == 3, failing.stderr
    for attempt in range(3):
        for rank in range(2):
            assert f"attempt {attempt} torchelastic {attempt} rank {rank}" in failing.stdout
    assert "restart 1 of 2" in failing.stderr and "restart 2 of 2" in failing.stderr
    assert failing.stderr.count("failed first: exit code 3") == 3
    recovering = run_meshcomm("run", "-n", "2", "--max-restarts", "2", str(program), "3", "1", timeout=90)
    assert recovering.returncode == 0, recovering.stderr
    assert "restart 1 of 2" in recovering.stderr and "restart 2 of 2" not in recovering.stderr
    without = run_meshcomm("run", "-n", "2", str(program), "3", "1", timeout=90)
    assert without.returncode == 3 and "restart" not in without.stderr


@pytest.mark.timeout(150)
def test_every_hosts_launcher_restarts_together(tmp_path) -> None:
    program = tmp_path / "two_hosts.py"
    program.write_text(TWO_HOSTS)
    port = str(free_port())
    launchers = [[sys.executable, "-m", "meshcomm", "run", "-n", "2", "--nnodes", "2", "--node-rank", str(host),
                  "--master-port", port, "--host-id", f"host{host}", "--max-restarts", "1", "--timeout", "30",
                  str(program)] for host in range(2)]
    exits = run_commands(launchers, env=fresh_job_env({"MESHCOMM_TOKEN": secrets.token_hex(16)}), timeout=120)
    for host, done in enumerate(exits):
        assert done.returncode == 0, f"host {host}: {done.stderr}"
        assert "restart 1 of 1" in done.stderr, done.stderr
    output = exits[0].stdout + exits[1].stdout
    assert all(f"attempt 1 rank {rank} sum 4" in output for rank in range(4)), output
    assert "attempt 0 rank" not in output  # nobody completed the failed attempt's all_reduce

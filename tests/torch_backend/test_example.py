"""Launchers: examples/ddp_train.py on 4 ranks under `meshcomm run` and torchrun (same losses), and torch.multiprocessing.spawn."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from tests.ranks import free_port, fresh_job_env, run_command  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
STEPS = "60"


def _losses(command: list[str]) -> list[tuple[int, float]]:
    done = run_command(command, env=fresh_job_env({"OMP_NUM_THREADS": "1"}), timeout=180)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    found = re.findall(r"step +(\d+) +loss ([0-9.]+)", done.stdout)
    return [(int(step), float(loss)) for step, loss in found]


@pytest.fixture(scope="module")
def meshcomm_run() -> list[tuple[int, float]]:
    return _losses([sys.executable, "-m", "meshcomm", "run", "-n", "4", str(EXAMPLE), "--steps", STEPS])


@pytest.mark.slow
def test_example_trains_under_meshcomm_run(meshcomm_run):
    assert [step for step, _ in meshcomm_run] == [1, 50, 60]
    assert meshcomm_run[-1][1] < meshcomm_run[0][1] / 4


@pytest.mark.slow
def test_example_gives_the_same_losses_under_torchrun(meshcomm_run):
    torchrun = _losses([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
                        "--master-port", str(free_port()), str(EXAMPLE), "--steps", STEPS])
    assert torchrun == meshcomm_run


def test_ranks_started_by_torch_multiprocessing_spawn():
    program = Path(__file__).with_name("spawn_program.py")
    done = run_command([sys.executable, str(program), "2", str(free_port())], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(0, [3.0, 3.0]), (1, [3.0, 3.0])]"


@pytest.mark.slow
def test_ddp_loses_a_rank_shrinks_rescales_and_finishes():
    example = EXAMPLE.with_name("ddp_shrink.py")
    done = run_command([sys.executable, "-m", "meshcomm", "run", "-n", "4", "--on-failure", "continue", str(example),
                        "--steps", "120", "--kill-at", "40"], env=fresh_job_env({"OMP_NUM_THREADS": "1"}), timeout=180)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "step   40  lost a rank (RuntimeError); world 4 -> 3, lr 0.0375" in done.stdout, done.stdout
    rows = [(int(s), float(loss), int(w)) for s, loss, w in
            re.findall(r"step +(\d+) +loss ([0-9.]+) +world (\d)", done.stdout)]
    assert [(s, w) for s, _, w in rows] == [(1, 4), (50, 3), (100, 3), (120, 3)], done.stdout
    assert rows[-1][1] < rows[0][1] / 4
    assert "carried on without lost rank(s) [2]" in done.stderr, done.stderr

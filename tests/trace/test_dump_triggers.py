"""What makes a rank dump its flight recorder, and how a timeout names the ranks that had not arrived."""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np

import meshcomm as dist
from meshcomm.group.health import summarize_progress
from meshcomm.trace import doctor
from tests.ranks import fresh_job_env, run_meshcomm


def test_sigusr1_dumps_the_flight_recorder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MESHCOMM_DUMP_DIR", str(tmp_path))
    dist.init_process_group(init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1, timeout=30)
    try:
        dist.all_reduce(np.ones(3))
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not (tmp_path / "rank0.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        dump = json.loads((tmp_path / "rank0.json").read_text())
    finally:
        dist.destroy_process_group()
    assert dump["reason"] == "SIGUSR1"
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # given back on destroy


def test_progress_reports_name_who_had_not_arrived() -> None:
    reports = {1: "7 started all_reduce(float32, 4 elements, op=sum)", 2: "6 done broadcast(int64, 1 elements, root=0)"}
    text = summarize_progress((0, 1, 2, 3), 0, 7, reports)
    assert text.startswith("ranks [2, 3] had not arrived")
    assert "rank 2: last at seq 6, done broadcast" in text and "rank 3: reported nothing" in text
    assert text.endswith("ranks [1] had")
    assert summarize_progress((0, 1), 0, 7, {1: "7 started x"}) == "every other rank of the group reached seq 7"


STALL = """
import time
import numpy as np
import meshcomm as dist
dist.init_process_group()
x = np.ones(4, np.float32)
dist.all_reduce(x)
if dist.get_rank() == 2:
    time.sleep(30)  # stuck outside any collective: only its monitor can dump it
dist.all_reduce(x)
dist.destroy_process_group()
"""


def test_a_rank_stuck_outside_collectives_dumps_before_a_timeout_ends_the_job(tmp_path) -> None:
    """The README's doctor example under `meshcomm run`: the timed-out ranks' exit stops the job (and rank 0's
    store), so they wait for the stuck rank's dump first."""
    program = tmp_path / "stall.py"
    program.write_text(STALL)
    env = fresh_job_env({"MESHCOMM_DUMP_DIR": str(tmp_path / "dumps")})
    done = run_meshcomm("run", "-n", "3", "--timeout", "3", str(program), env=env, timeout=90)
    assert done.returncode != 0 and "CommTimeoutError" in done.output, done.stderr[-2000:]
    findings = doctor.diagnose(doctor.load(str(tmp_path / "dumps")))
    assert [(f.kind, f.ranks) for f in findings] == [("stalled", [2])]

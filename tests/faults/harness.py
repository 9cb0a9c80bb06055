"""Runs a fault scenario as plain rank processes (tests.ranks.run_program: no launcher, which would stop the
survivors itself), every process bounded and reaped, and collects what each rank reported."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.ranks import free_port, fresh_job_env, run_program, started

PROGRAM = Path(__file__).with_name("fault_program.py")


@dataclass
class Outcome:
    rank: int
    returncode: int | None
    result: dict | None  # the rank's RESULT line, None if it printed none (killed, crashed)
    stderr: str

    @property
    def error(self) -> str | None:
        return None if self.result is None else self.result.get("error")

    @property
    def message(self) -> str:
        return "" if self.result is None else self.result.get("message", "")


@dataclass
class Run:
    outcomes: list[Outcome]
    kill_time: float | None
    job_id: str
    dump_dir: Path
    leftovers: list[str] = field(default_factory=list)  # /dev/shm entries of this job after it ended

    def survivors(self, victim: int | None) -> list[Outcome]:
        return [o for o in self.outcomes if o.rank != victim]

    def seconds_to_error(self, outcome: Outcome) -> float | None:
        if outcome.result is None or outcome.result["outcome"] != "error":
            return None
        since = self.kill_time if self.kill_time is not None else outcome.result["started"]
        return outcome.result["ended"] - since


def run_scenario(
    tmp_path: Path, nranks: int, scenario: str, collective: str, victim: int, other: str = "",
    timeout: float = 30.0, transport: str = "auto", bound: float = 90.0, env: dict | None = None,
) -> Run:
    """Start `nranks` ranks of fault_program.py, wait at most `bound` seconds, kill and reap them all.

    `env` adds variables to every rank's environment (e.g. MESHCOMM_ALGO, FAULT_COUNT)."""
    job_id = f"fault{uuid.uuid4().hex[:10]}"
    mark = tmp_path / f"{job_id}.killed"
    dump_dir = tmp_path / f"{job_id}-dumps"
    variables = dict(
        MESHCOMM_TOKEN=f"token-{job_id}", MESHCOMM_TRANSPORT=transport, MESHCOMM_JOB_ID=job_id,
        MESHCOMM_DUMP_DIR=str(dump_dir), FAULT_TIMEOUT=str(timeout), FAULT_MARK=str(mark), **(env or {}),
    )
    with contextlib.ExitStack() as stack:
        if scenario == "store":
            port = str(free_port())
            store = stack.enter_context(started([sys.executable, "-m", "meshcomm", "store", "--port", port],
                                                env=fresh_job_env(variables), grace=0,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            variables.update(MASTER_PORT=port, MESHCOMM_STORE="external", FAULT_STORE_PID=str(store.pid))
        exits = run_program(PROGRAM, nranks, [scenario, collective, str(victim), other], env=variables,
                            timeout=bound)
    outcomes = []
    for rank, done in enumerate(exits):
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        result = json.loads(lines[-1][len("RESULT "):]) if lines else None
        stderr = done.stderr + ("\nHUNG: killed by the harness at the deadline" if done.timed_out else "")
        outcomes.append(Outcome(rank, done.returncode, result, stderr))
    kill_time = float(mark.read_text()) if mark.exists() else None
    leftovers = [name for name in os.listdir("/dev/shm") if job_id in name] if os.path.isdir("/dev/shm") else []
    return Run(outcomes, kill_time, job_id, dump_dir, leftovers)

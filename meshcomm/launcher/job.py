"""launch(): run a command as N ranks on this host, the engine behind `meshcomm run`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from meshcomm import config
from meshcomm.launcher.env import JobLayout, child_environ, resolve_token
from meshcomm.launcher.ports import free_port
from meshcomm.launcher.process import RankSpec, Supervisor
from meshcomm.launcher.report import describe
from meshcomm.transport import shm


def python_script_command(script: str, args: Sequence[str] = ()) -> list[str]:
    """argv running a Python file with this interpreter, as `meshcomm run script.py` does."""
    return [sys.executable, script, *args]


def python_module_command(module: str, args: Sequence[str] = ()) -> list[str]:
    """argv running a module with this interpreter, as `meshcomm run -m module` does."""
    return [sys.executable, "-m", module, *args]


def kill_grace() -> float:
    grace = config.get_float("MESHCOMM_KILL_GRACE")
    if grace < 0:
        raise ValueError(f"MESHCOMM_KILL_GRACE must be >= 0 seconds, got {grace}")
    return grace


def make_layout(
    nproc: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = "127.0.0.1",
    master_port: int = 0,
    timeout: float | None = None,
    host_id: str | None = None,
    env_extra: Mapping[str, str] | None = None,
) -> JobLayout:
    """Check the arguments, pick the port and token, and return this host's layout."""
    if not 0 <= master_port <= 65535:
        raise ValueError(f"master_port must be in [0, 65535] (0 = pick a free one), got {master_port}")
    if master_port == 0:
        if nnodes > 1:
            # A port picked here would be unknown to the other nodes' launchers.
            raise ValueError(f"master_port is required when nnodes > 1 (got nnodes={nnodes}): every node must name the same store port")
        master_port = free_port()
    return JobLayout(
        nproc=nproc,
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        token=resolve_token(nnodes, env_extra),
        timeout=timeout,
        host_id=host_id,
    )


def rank_specs(cmd: Sequence[str], layout: JobLayout, env_extra: Mapping[str, str] | None = None) -> list[RankSpec]:
    return [
        RankSpec(
            rank=layout.global_rank(local_rank),
            local_rank=local_rank,
            argv=list(cmd),
            env=child_environ(os.environ, layout, local_rank, env_extra),
        )
        for local_rank in range(layout.nproc)
    ]


def launch(
    cmd: Sequence[str],
    nproc: int,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str = "127.0.0.1",
    master_port: int = 0,
    prefix: bool = True,
    timeout: float | None = None,
    host_id: str | None = None,
    env_extra: Mapping[str, str] | None = None,
    grace: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run `cmd` as ranks node_rank*nproc ... node_rank*nproc+nproc-1 and return the job's exit code.

    The exit code is 0, the first failing rank's (128 + signal number when it
    died by a signal), or 128 + the signal that interrupted the launcher.
    Raises ValueError for bad arguments before any process starts.
    """
    layout = make_layout(
        nproc,
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        timeout=timeout,
        host_id=host_id,
        env_extra=env_extra,
    )
    return run_job(cmd, layout, prefix=prefix, env_extra=env_extra, grace=grace, stdout=stdout, stderr=stderr)


def run_job(
    cmd: Sequence[str],
    layout: JobLayout,
    *,
    prefix: bool = True,
    env_extra: Mapping[str, str] | None = None,
    grace: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """launch() for a layout already made: starts, supervises, reports on stderr, returns the exit code."""
    if isinstance(cmd, str) or not cmd or not all(isinstance(part, str) for part in cmd):
        raise TypeError(f"cmd must be a non-empty list of str, got {cmd!r}")
    err = stderr if stderr is not None else sys.stderr
    supervisor = Supervisor(
        rank_specs(cmd, layout, env_extra),
        prefix=prefix,
        grace=kill_grace() if grace is None else grace,
        stdout=stdout if stdout is not None else sys.stdout,
        stderr=err,
    )
    result = supervisor.run()
    shm.remove_segments(layout.job_id)
    for line in describe(result):
        print(line, file=err, flush=True)
    return result.exit_code

"""launch(): run a command as N ranks on this host, the engine behind `meshcomm run`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from meshcomm import config, native
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
    max_restarts: int = 0,
    carry_on: bool = False,
) -> int:
    """Run `cmd` as ranks node_rank*nproc ... node_rank*nproc+nproc-1 and return the job's exit code.

    The exit code is 0, the first failing rank's (128 + signal number when it
    died by a signal), or 128 + the signal that interrupted the launcher; with
    `max_restarts`, the last attempt's (run_job). Raises ValueError for bad
    arguments before any process starts.
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
    return run_job(cmd, layout, prefix=prefix, env_extra=env_extra, grace=grace, stdout=stdout, stderr=stderr,
                   max_restarts=max_restarts, fresh_port=master_port == 0, carry_on=carry_on)


def run_job(
    cmd: Sequence[str],
    layout: JobLayout,
    *,
    prefix: bool = True,
    env_extra: Mapping[str, str] | None = None,
    grace: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    max_restarts: int = 0,
    fresh_port: bool = False,
    carry_on: bool = False,
) -> int:
    """launch() for a layout already made: starts, supervises, reports on stderr, returns the exit code.

    When a rank fails, every rank is stopped and, up to `max_restarts` times, all are started again
    (torchrun's elastic restarts): a new store generation each time (a new job id, a token derived from the job's
    for that attempt, and a new port when `fresh_port`), with MESHCOMM_RESTART_COUNT and
    TORCHELASTIC_RESTART_COUNT telling the program which attempt it is. The exit code is the last attempt's.

    With `carry_on` (--on-failure continue), a rank killed by a signal does not stop the others, which may shrink
    their groups and go on; the job then fails only if a rank exits with an error, or the last one is killed.
    """
    if isinstance(cmd, str) or not cmd or not all(isinstance(part, str) for part in cmd):
        raise TypeError(f"cmd must be a non-empty list of str, got {cmd!r}")
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
    err = stderr if stderr is not None else sys.stderr
    grace = kill_grace() if grace is None else grace
    external_store = ((env_extra or {}).get("MESHCOMM_STORE") or config.get("MESHCOMM_STORE")) == "external"
    if native.core is None and config.get("MESHCOMM_NATIVE") != "0":  # said once per job, where it was not chosen
        print(f"meshcomm run: the ranks run the pure-Python per-call path: {native.describe().split(': ', 1)[1]}",
              file=err, flush=True)
    attempt = 0
    while True:
        extra = {**(env_extra or {}), "MESHCOMM_RESTART_COUNT": str(attempt),
                 "TORCHELASTIC_RESTART_COUNT": str(attempt), "TORCHELASTIC_MAX_RESTARTS": str(max_restarts)}
        supervisor = Supervisor(rank_specs(cmd, layout, extra), prefix=prefix, grace=grace,
                                stdout=stdout if stdout is not None else sys.stdout, stderr=err, carry_on=carry_on)
        result = supervisor.run()
        shm.remove_segments(layout.job_id)
        for line in describe(result):
            print(line, file=err, flush=True)
        if (result.exit_code == 0 or attempt >= max_restarts or result.interrupted_by is not None
                or result.start_error is not None):
            return result.exit_code
        attempt += 1
        print(f"meshcomm run: restarting all {layout.nproc} rank(s) of this host, restart {attempt} of "
              f"{max_restarts} (MESHCOMM_RESTART_COUNT={attempt})", file=err, flush=True)
        layout = _next_generation(layout, attempt, fresh_port, external_store)


def _next_generation(layout: JobLayout, attempt: int, fresh_port: bool, external_store: bool) -> JobLayout:
    """The layout of restart `attempt`: nothing of the failed attempt can join it. Every host's launcher derives the
    same token from the job's, so the restarted hosts meet again; an external store keeps the job's token."""
    token = layout.token if external_store else _restart_token(layout.token, attempt)
    return dataclasses.replace(layout, job_id=secrets.token_hex(6), token=token,
                               master_port=free_port() if fresh_port else layout.master_port)


def _restart_token(token: str, attempt: int) -> str:
    return hashlib.sha256(f"{token}:restart:{attempt}".encode()).hexdigest()

"""How tests start rank processes, and the promise that every process started here is reaped.

Every wait has a deadline; a process still running at its deadline is
stopped (a command's whole process group gets SIGTERM, then SIGKILL), reaped,
and its Exit says `timed_out`. The forms:

- Cluster(size, env): ranks that stay up across tests and run the functions
  sent to them. Starting processes is the slow part of a distributed test,
  so conftest keeps one cluster per world size for the whole session; a
  cluster whose call failed or timed out is torn down and started afresh.
- run_function(fn, nranks, *args): fresh ranks, each running
  fn(rank, nranks, *args) once; their results, or RankError.
- run_program(program, nranks, args): nranks plain interpreters of a script,
  meeting through rank 0's store (RANK, WORLD_SIZE, MASTER_ADDR/PORT set, no
  launcher, so nothing but the deadline stops the survivors of a failure);
  each rank's Exit.
- run_command(argv): one command that starts ranks itself (`meshcomm run`,
  torchrun, mpiexec, a script that spawns); its Exit.
- started(argv): a running command for a test to talk to (pipes, signals);
  stopped and reaped when the `with` block ends.

Ranks get this process's environment less a launcher's variables
(fresh_job_env), with this repository first on PYTHONPATH, so a rank imports
the meshcomm under test.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without what a launcher sets (MESHCOMM_*, RANK*, WORLD_SIZE*, MASTER_*), this
    repository first on PYTHONPATH, then `extra`: a job a test starts with it is a job of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHCOMM_", "RANK", "WORLD_SIZE", "MASTER_"))}
    paths = [str(REPO), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


class RankError(AssertionError):
    def __init__(self, failures: dict[int, str]) -> None:
        self.failures = failures
        text = "\n".join(f"--- rank {r}:\n{msg}" for r, msg in sorted(failures.items()))
        super().__init__(f"{len(failures)} rank(s) failed:\n{text}")


# ---------------------------------------------------------------------------------------------------------------
# Processes of a program or command


@dataclass
class Exit:
    """How one process ended. returncode is negative for a signal (-9: SIGKILL, by itself or at the deadline)."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False  # still running at the deadline: stopped and reaped by the harness

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class _Process:
    """A Popen in a session of its own, its output going to files (no pipe to fill while another is waited for)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None, cwd=None, stdout=None,
                 merge_stderr: bool = False) -> None:
        self.out = tempfile.TemporaryFile() if stdout is None else None
        self.err = None if merge_stderr else tempfile.TemporaryFile()
        self.popen = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True,
            stdout=self.out if stdout is None else stdout,
            stderr=subprocess.STDOUT if merge_stderr else self.err)
        self.timed_out = False

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def exit(self) -> Exit:
        def text(file) -> str:
            if file is None:
                return ""
            file.seek(0)
            data = file.read().decode(errors="replace")
            file.close()
            return data

        return Exit(self.popen.returncode, text(self.out), text(self.err), self.timed_out)


def _wait_all(processes: list[_Process], timeout: float, grace: float) -> list[Exit]:
    """Wait for every process until one deadline. Those still running then get SIGTERM and `grace` seconds
    (grace 0: SIGKILL at once), then SIGKILL; every one is reaped."""
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            try:
                process.popen.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                process.timed_out = True
        late = [p for p in processes if p.popen.poll() is None]
        if late and grace > 0:
            for process in late:
                process.signal_group(signal.SIGTERM)
            until = time.monotonic() + grace
            for process in late:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.popen.wait(timeout=max(until - time.monotonic(), 0.01))
    finally:
        for process in processes:
            if process.popen.poll() is None:
                # With what it started in its process group (not a launcher's ranks: they have sessions of
                # their own, and the launcher stopped them on the SIGTERM).
                process.signal_group(signal.SIGKILL)
                process.popen.kill()
            process.popen.wait()
    return [process.exit() for process in processes]


def run_program(program: str | Path, nranks: int, args: Sequence[str] = (), env: dict[str, str] | None = None,
                timeout: float = 90.0, per_rank: Callable[[int], dict[str, str]] | None = None) -> list[Exit]:
    """Start `nranks` interpreters of `program` as one job without a launcher; each rank's Exit.

    Every rank gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (a
    free port: rank 0 serves the store), `env`, and `per_rank(rank)` if given.
    A rank still running after `timeout` seconds is killed (SIGKILL).
    """
    base = fresh_job_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(nranks),
                          **(env or {})})
    argv = [sys.executable, str(program), *args]
    processes: list[_Process] = []
    try:
        for rank in range(nranks):
            rank_env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), **(per_rank(rank) if per_rank else {})}
            processes.append(_Process(argv, rank_env))
    finally:
        exits = _wait_all(processes, timeout, grace=0)
    return exits


def run_command(argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = 90.0, cwd=None,
                stdout=None, merge_stderr: bool = False, grace: float = 15.0) -> Exit:
    """Run one command (e.g. `python -m meshcomm run -n 2 x.py`) with `env` (default: fresh_job_env()).

    Past `timeout` seconds its process group gets SIGTERM (a launcher stops
    its ranks on it), and SIGKILL `grace` seconds later. `stdout` redirects
    its standard output (then Exit.stdout is empty); merge_stderr sends its
    standard error there too.
    """
    process = _Process(argv, fresh_job_env() if env is None else env, cwd, stdout, merge_stderr)
    (done,) = _wait_all([process], timeout, grace)
    return done


def run_commands(commands: Sequence[Sequence[str]], env: dict[str, str] | None = None, timeout: float = 90.0,
                 merge_stderr: bool = False, grace: float = 15.0) -> list[Exit]:
    """Several commands at once (e.g. one launcher per host), waited for until one deadline, as run_command."""
    processes: list[_Process] = []
    try:
        for argv in commands:
            processes.append(_Process(argv, fresh_job_env() if env is None else env, merge_stderr=merge_stderr))
    finally:
        exits = _wait_all(processes, timeout, grace)
    return exits


def run_meshcomm(*args: str, env: dict[str, str] | None = None, timeout: float = 90.0, **kwargs) -> Exit:
    """`python -m meshcomm ARGS` through run_command."""
    return run_command([sys.executable, "-m", "meshcomm", *args], env=env, timeout=timeout, **kwargs)


@contextlib.contextmanager
def started(argv: Sequence[str], env: dict[str, str] | None = None, grace: float = 15.0,
            **popen: object) -> Iterator[subprocess.Popen]:
    """A running command for the test to talk to (popen options as given, e.g. pipes), in a session of its
    own. When the block ends, a command still running gets SIGTERM, then SIGKILL `grace` seconds later, with its
    process group; it is reaped and its pipes closed."""
    proc = subprocess.Popen(list(argv), env=fresh_job_env() if env is None else env, start_new_session=True,
                            **popen)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        if proc.poll() is None and grace > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=30)
        except (subprocess.TimeoutExpired, ValueError):  # ValueError: the test closed a pipe itself
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


# ---------------------------------------------------------------------------------------------------------------
# Processes that run Python functions


def _collect(outbox, procs: list, timeout: float, may_die: frozenset[int] = frozenset()) -> list:
    """Each rank's (rank, ok, value) from `outbox`: the values in rank order, or RankError naming each rank that
    failed, died without answering (unless in `may_die`: its value is None) or had not answered in time."""
    size = len(procs)
    deadline = time.monotonic() + timeout
    results: dict[int, object] = {}
    failures: dict[int, str] = {}
    while len(results) + len(failures) < size:
        remaining = deadline - time.monotonic()
        try:
            rank, ok, value = outbox.get(timeout=max(min(remaining, 0.5), 0.01))
        except queue.Empty:
            gone = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results and r not in failures]
            for r in gone:
                if r in may_die:
                    results[r] = None
            dead = [r for r in gone if r not in may_die]
            if remaining <= 0 or dead:
                missing = sorted(set(range(size)) - set(results) - set(failures))
                why = f"ranks {dead} died" if dead else f"no answer within {timeout:.0f} s"
                raise RankError({**failures, **{r: why for r in missing}}) from None
            continue
        (results if ok else failures)[rank] = value
    if failures:
        raise RankError(failures)
    return [results[r] for r in range(size)]


def _reap(procs: list, grace: float) -> None:
    for p in procs:
        p.join(timeout=grace)
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(timeout=10)


def _close(*queues) -> None:
    for q in queues:
        q.close()
        q.join_thread()


def _run_once(rank: int, size: int, outbox, env: dict, fn, args) -> None:
    os.environ.update(env)
    try:
        result = fn(rank, size, *args)
    except BaseException as exc:  # reported to the test, which fails with it
        outbox.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    outbox.put((rank, True, result))


def run_function(fn, nranks: int, *args, timeout: float = 90.0, env: dict | None = None,
                 may_die: frozenset[int] = frozenset(), context=None) -> list:
    """fn(rank, nranks, *args) in `nranks` fresh processes (multiprocessing `context`, default spawn); their
    results in rank order, or RankError. `fn` must be importable by name. Every process is reaped before this
    returns, also when one hangs or dies; a rank in `may_die` that exits without answering gets None."""
    ctx = context or mp.get_context("spawn")
    outbox = ctx.Queue()
    procs = [ctx.Process(target=_run_once, args=(r, nranks, outbox, env or {}, fn, args), daemon=True)
             for r in range(nranks)]
    clean = False
    try:
        for p in procs:
            p.start()
        results = _collect(outbox, procs, timeout, may_die)
        clean = True
        return results
    finally:
        _reap(procs, grace=20 if clean else 0)
        _close(outbox)


def _serve(rank: int, size: int, port: int, inbox, outbox, env: dict) -> None:
    # A list value gives each rank its own (e.g. MESHCOMM_HOST_ID to fake hosts).
    os.environ.update({k: v[rank] if isinstance(v, list) else v for k, v in env.items()})
    import meshcomm as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size, timeout=30)
    except BaseException:
        outbox.put((rank, False, traceback.format_exc()))
        return
    outbox.put((rank, True, "ready"))
    while True:
        item = inbox.get()
        if item is None:
            break
        fn, args = item
        try:
            outbox.put((rank, True, fn(*args)))
        except BaseException as exc:  # reported to the test, which fails with it
            outbox.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    dist.destroy_process_group()


class Cluster:
    """`size` ranks of one meshcomm job that stay up and run the functions sent to them.

    `env` is set in every rank before meshcomm starts; a list value gives rank
    r its r-th item. Every call has a deadline; a cluster whose call failed or
    timed out is `broken`, and close() kills and reaps every rank.
    """

    def __init__(self, size: int, env: dict | None = None, start_timeout: float = 60.0) -> None:
        self.size = size
        ctx = mp.get_context("spawn")
        port = free_port()
        self.inboxes = [ctx.Queue() for _ in range(size)]
        self.outbox = ctx.Queue()
        self.procs = [
            ctx.Process(target=_serve, args=(r, size, port, self.inboxes[r], self.outbox, env or {}), daemon=True)
            for r in range(size)
        ]
        self.broken = self.closed = False
        try:
            for p in self.procs:
                p.start()
            self._collect(start_timeout)
        except BaseException:
            self.close()
            raise

    def _collect(self, timeout: float) -> list:
        try:
            return _collect(self.outbox, self.procs, timeout)
        except RankError:
            self.broken = True
            raise

    def run(self, fn, *args, timeout: float = 60.0) -> list:
        """Run fn(*args) on every rank; return the per-rank results or raise RankError."""
        for inbox in self.inboxes:
            inbox.put((fn, args))
        return self._collect(timeout)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.broken:
            for inbox in self.inboxes:
                inbox.put(None)
        _reap([p for p in self.procs if p.pid is not None], grace=0 if self.broken else 10)
        _close(*self.inboxes, self.outbox)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_shared: dict[int, Cluster] = {}


def get_cluster(size: int) -> Cluster:
    """The test session's cluster of `size` ranks: started on first use, started afresh after it broke."""
    cluster = _shared.get(size)
    if cluster is not None and cluster.broken:
        cluster.close()
        cluster = None
    if cluster is None:
        cluster = _shared[size] = Cluster(size)
    return cluster


def close_shared_clusters() -> None:
    for cluster in _shared.values():
        cluster.close()
    _shared.clear()

"""Starting benchmark jobs and collecting their results: one library's sweep, or several side by side.

meshcomm and gloo jobs are started by `meshcomm run`'s launcher (which sets
the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE that torch's env:// reads too),
MPICH jobs by `mpiexec`. A comparison interleaves the libraries: the sizes
are cut into rounds, and for every collective and round each library runs its
job in turn, the order rotating from round to round, so a noisy minute of the
machine lands on all of them instead of on one library's whole sweep.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TextIO

from meshcomm.bench import report
from meshcomm.bench.libs import INSTALL_HINTS, LIBS
from meshcomm.bench.sizes import human_bytes
from meshcomm.bench.worker import Spec, planned_rows

WORKER = "meshcomm.bench.worker"
# Sizes per round of a comparison: 8 B ... 64 MiB (24 sizes) is 4 rounds.
SIZES_PER_ROUND = 6
# A job that ended with one of these was stopped by the user, not failed: the sweep stops too.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Variables a launcher gives its ranks; mpiexec's ranks must not inherit stale ones.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                   "GROUP_RANK", "NODE_RANK")


@dataclass
class Plan:
    """A benchmark as the command line asked for it."""

    nproc: int
    colls: list[str]
    sizes: list[int]
    libs: list[str] = field(default_factory=lambda: ["meshcomm"])  # the first is the base of ratios
    dtype: str = "float32"
    op: str = "sum"
    root: int = 0
    algos: dict[str, str] = field(default_factory=dict)
    iters: int | None = None
    warmup: int | None = None
    check: bool = False
    timeout: float | None = None
    budget: float | None = None

    def spec(self, lib: str, colls: Sequence[str], sizes: Sequence[int], json_path: str | None) -> Spec:
        extra = {} if self.budget is None else {"budget": self.budget}
        return Spec(lib=lib, colls=list(colls), sizes=list(sizes), dtype=self.dtype, op=self.op, root=self.root,
                    algos=dict(self.algos), iters=self.iters, warmup=self.warmup, check=self.check,
                    json=json_path, timeout=self.timeout, **extra)


def algorithms_for(text: str | None, colls: Sequence[str]) -> dict[str, str]:
    """--algo: 'ring' for every chosen collective that has it, or 'all_reduce:ring,broadcast:chain'."""
    from meshcomm.algorithms import ALGORITHMS
    from meshcomm.algorithms.choice import parse_override

    return parse_override(text or "", ALGORITHMS, source="--algo", scope=list(colls))


def missing(lib: str) -> str | None:
    """Why `lib` cannot run here, with the command that fixes it; None when it can."""
    if lib not in LIBS:
        raise ValueError(f"lib must be one of {', '.join(LIBS)}, got {lib!r}")
    if lib == "gloo" and importlib.util.find_spec("torch") is None:
        return f"torch is not installed ({INSTALL_HINTS['torch']})"
    if lib.startswith("mpich"):
        if importlib.util.find_spec("mpi4py") is None:
            return f"mpi4py is not installed ({INSTALL_HINTS['mpi4py']})"
        if shutil.which("mpiexec") is None:
            return f"mpiexec is not on PATH ({INSTALL_HINTS['mpiexec']})"
    return None


def run_job(spec: Spec, nproc: int, stdout: TextIO, stderr: TextIO) -> tuple[int, list[report.Record]]:
    """Run one worker job on nproc ranks; returns its exit code and the rows it finished."""
    from meshcomm.launcher import launch, python_module_command

    with tempfile.TemporaryDirectory(prefix="meshcomm-bench-") as tmp:
        spec = replace(spec, json=os.path.join(tmp, "rows.jsonl"))
        cmd = python_module_command(WORKER, [spec.to_json()])
        if spec.lib in ("meshcomm", "gloo"):
            code = launch(cmd, nproc, prefix=False, timeout=spec.timeout, stdout=stdout, stderr=stderr)
        else:
            code = _mpiexec(cmd, nproc, stdout, stderr)
        records = report.read_json_lines(spec.json) if os.path.exists(spec.json) else []
    if code - 128 in _STOP_SIGNALS:
        raise KeyboardInterrupt  # the launcher forwarded Ctrl-C or SIGTERM to the ranks; stop here too
    return code, records


@contextmanager
def _stoppable() -> Iterator[None]:
    """SIGTERM and SIGHUP stop a sweep like Ctrl-C, so `finally` blocks stop a running mpiexec.

    (During a launcher job the launcher's own handlers take over and forward the
    signal to the ranks; run_job then raises.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Marks an mpiexec job's processes, so that an interrupted sweep can find every one.
_JOB_VARIABLE = "MESHCOMM_BENCH_JOB"


def _mpiexec(cmd: list[str], nproc: int, stdout: TextIO, stderr: TextIO) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHCOMM_") and k not in _RANK_VARIABLES}
    env["PYTHONUNBUFFERED"] = "1"
    env[_JOB_VARIABLE] = job = f"{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(["mpiexec", "-n", str(nproc), *cmd], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stdout is not None and proc.stderr is not None
    errors = threading.Thread(target=_copy, args=(proc.stderr, stderr), daemon=True)
    errors.start()
    try:
        _copy(proc.stdout, stdout)
        code = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted
            _stop_mpiexec(proc, job)
        errors.join(timeout=5)
    return code


def _stop_mpiexec(proc: subprocess.Popen, job: str) -> None:
    """SIGTERM mpiexec, then SIGKILL whatever of its job outlives it.

    Hydra starts each rank in a session of its own, so no process-group signal
    reaches them, and a SIGTERM that comes while hydra is still starting them
    can leave them running. They carry the job's token in their environment.
    """
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while (left := _processes_with(f"{_JOB_VARIABLE}={job}".encode())) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def _processes_with(entry: bytes) -> list[int]:
    """This user's processes whose environment holds `entry` (none where /proc is absent)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else []):
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if entry in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _copy(source, sink: TextIO) -> None:
    for line in source:
        sink.write(line)
        sink.flush()


def sweep(plan: Plan, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> tuple[int, list[report.Record]]:
    """One library, every collective and size in one job; its table rows go to `out` as they come."""
    lib = plan.libs[0]
    spec = plan.spec(lib, plan.colls, plan.sizes, None)
    progress = report.Progress(planned_rows(spec, plan.nproc), err) if _is_terminal(err) else None
    try:
        with _stoppable():
            code, records = run_job(spec, plan.nproc, report.RowStream(out, progress), err)
    finally:
        if progress is not None:
            progress.clear()
    if code != 0:
        print(f"meshcomm bench: the {lib} job failed (exit {code})", file=err)
    return code, records


def rounds(sizes: Sequence[int], per_round: int = SIZES_PER_ROUND) -> list[list[int]]:
    return [list(sizes[i : i + per_round]) for i in range(0, len(sizes), per_round)]


def interleaved(colls: Sequence[str], chunks: Sequence[list[int]],
                libs: Sequence[str]) -> Iterator[tuple[str, list[int], str]]:
    """(collective, sizes, library) jobs: per collective and round every library once, the order rotating."""
    for coll in colls:
        for index, chunk in enumerate(chunks):
            turn = index % max(len(libs), 1)
            for lib in [*libs[turn:], *libs[:turn]]:
                yield coll, chunk, lib


def compare(plan: Plan, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
            markdown: bool = False) -> tuple[int, list[report.Record]]:
    """Every library of plan.libs, interleaved round by round; prints the side-by-side tables."""
    libs = []
    for lib in dict.fromkeys(plan.libs):
        reason = missing(lib)
        if reason is None:
            libs.append(lib)
        else:
            print(f"meshcomm bench: skipping {lib}: {reason}", file=err)
    total = sum(planned_rows(plan.spec(lib, plan.colls, plan.sizes, None), plan.nproc) for lib in libs)
    progress = report.Progress(total, err) if _is_terminal(err) else None
    note = progress.note if progress is not None else (lambda text: print(text, file=err, flush=True))
    stream = report.RowStream(None, progress)
    records: list[report.Record] = []
    failed: list[str] = []
    try:
        with _stoppable():
            for coll, chunk, lib in interleaved(plan.colls, rounds(plan.sizes), libs):
                if lib in failed:
                    continue
                start = time.monotonic()
                code, found = run_job(plan.spec(lib, [coll], chunk, None), plan.nproc, stream, err)
                records += found
                span = f"{human_bytes(chunk[0])}..{human_bytes(chunk[-1])}"
                if code != 0:
                    failed.append(lib)
                    note(f"# {coll} {span}: {lib} FAILED (exit {code}); leaving {lib} out from here on")
                else:
                    note(f"# {coll} {span}: {lib} {time.monotonic() - start:.1f} s")
    finally:
        if progress is not None:
            progress.clear()
    shown = [lib for lib in libs if any(r["lib"] == lib for r in records)]
    if shown:
        versions = dict.fromkeys(f"{r['lib']}: {r.get('version', '?')}" for r in records)
        prefix = "" if markdown else "# "
        print(f"{prefix}{plan.nproc} ranks on {os.cpu_count()} cores; " + "; ".join(versions), file=out)
        print("", file=out)
        for line in report.comparison(records, shown, markdown=markdown):
            print(line, file=out)
    out.flush()
    return (1 if failed else 0), records


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

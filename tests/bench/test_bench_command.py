"""`meshcomm bench` for real: ranks started, rows checked, JSON written; gloo and MPICH beside it where installed.

Every run is a subprocess with a deadline (tests.ranks); on timeout it gets
SIGTERM (the launcher forwards it to its ranks and reaps them, mpiexec stops
its own), then SIGKILL, and is always reaped. Nothing here asserts a time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ranks import run_meshcomm, started

FIELDS = {"lib", "coll", "ranks", "bytes", "time_us", "algbw_GBps", "busbw_GBps", "dtype", "op", "algo", "wrong"}


def bench(*args: str, timeout: float = 90) -> tuple[int, str, str]:
    done = run_meshcomm("bench", *args, "--timeout", "60", timeout=timeout, grace=20)
    if done.timed_out:
        pytest.fail(f"meshcomm bench {' '.join(args)} did not finish in {timeout} s:\n{done.output}")
    return done.returncode, done.stdout, done.stderr


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_checked_run_writes_a_correct_json_line_per_row(tmp_path: Path) -> None:
    out_file = tmp_path / "rows.jsonl"
    code, out, err = bench("all_reduce,all_gather", "-n", "2", "--sizes", "8:4K", "--check",
                           "--json", str(out_file))
    assert code == 0, out + err
    rows = lines_of(out_file)
    sizes = [8 << i for i in range(10)]
    assert [(r["coll"], r["bytes"]) for r in rows] == [("all_reduce", s) for s in sizes] + [
        ("all_gather", s) for s in sizes]
    for r in rows:
        assert FIELDS <= set(r)
        assert r["lib"] == "meshcomm" and r["ranks"] == 2 and r["dtype"] == "float32"
        assert r["wrong"] == 0, r
        assert r["time_us"] > 0 and r["busbw_GBps"] >= 0
    assert [r["op"] for r in rows[:1] + rows[-1:]] == ["sum", "none"]
    table = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert len(table) == 20 and all(line.split()[-1] == "0" for line in table)
    assert out.count("# Avg bus bandwidth") == 2


def test_algorithm_dtype_and_rooted_collectives_reach_the_ranks(tmp_path: Path) -> None:
    out_file = tmp_path / "rows.jsonl"
    code, out, err = bench("all_reduce", "broadcast,reduce_scatter,gather", "-n", "3", "--sizes", "96,4K",
                           "--dtype", "int32", "--op", "max", "--root", "2", "--algo", "ring", "--iters", "3",
                           "--warmup", "1", "--check", "--json", str(out_file))
    assert code == 0, out + err
    rows = {(r["coll"], r["bytes"]): r for r in lines_of(out_file)}
    assert rows[("all_reduce", 96)]["algo"] == "ring" and rows[("broadcast", 96)]["algo"] is None
    assert rows[("broadcast", 4096)]["root"] == 2 and rows[("all_reduce", 4096)]["root"] == -1
    assert rows[("reduce_scatter", 96)]["op"] == "max" and rows[("gather", 96)]["op"] == "none"
    assert all(r["wrong"] == 0 and r["iters"] == 3 and r["dtype"] == "int32" for r in rows.values())


def _compare(lib: str, tmp_path: Path) -> list[dict]:
    out_file = tmp_path / "rows.jsonl"
    code, out, err = bench("all_reduce", "-n", "2", "--sizes", "8:1K", "--iters", "20", "--check",
                           "--compare", lib, "--json", str(out_file), timeout=150)
    assert code == 0, out + err
    assert f"meshcomm/{lib}" in out
    return lines_of(out_file)


@pytest.mark.slow
def test_compare_with_gloo(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    rows = _compare("gloo", tmp_path)
    assert {r["lib"] for r in rows} == {"meshcomm", "gloo"}
    assert all(r["wrong"] == 0 for r in rows) and len(rows) == 2 * 8


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec is not installed (apt-get install -y mpich)")
def test_compare_with_mpich(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install --no-binary mpi4py mpi4py)")
    rows = _compare("mpich", tmp_path)
    assert {r["lib"] for r in rows} == {"meshcomm", "mpich"}
    assert all(r["wrong"] == 0 for r in rows) and len(rows) == 2 * 8


def _workers_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "meshcomm.bench.worker" in cmdline and marker in cmdline:
            found.append(pid)
    return found


@pytest.mark.parametrize("rival", ["meshcomm", "mpich"])
def test_sigterm_stops_the_sweep_and_its_ranks(rival: str) -> None:
    if rival == "mpich" and shutil.which("mpiexec") is None:
        pytest.skip("MPICH's mpiexec is not installed (apt-get install mpich libmpich-dev)")
    if rival == "mpich" and not _has("mpi4py"):
        pytest.skip("mpi4py is not installed (pip install --no-binary mpi4py mpi4py)")
    marker = "61.25"  # a --timeout no other run uses, to find this run's ranks
    args = ["-n", "2", "--sizes", "8:64M", "--timeout", marker, "--lib", rival]
    with started([sys.executable, "-m", "meshcomm", "bench", *args], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, grace=0) as proc:
        deadline = time.monotonic() + 60
        while not _workers_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _workers_with(marker), "no rank started within 60 s"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 130
        deadline = time.monotonic() + 10
        while _workers_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _workers_with(marker) == []


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_a_reader_that_leaves_stops_the_table_not_the_job(tmp_path) -> None:
    """`meshcomm bench ... | head -1`: rank 0 finds nobody reading its table; the job still finishes its sweep."""
    out = tmp_path / "rows.jsonl"
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first row written fails with EPIPE
    try:
        done = run_meshcomm("bench", "all_reduce", "--timeout", "60", "-n", "2", "--sizes", "8,1K", "--iters", "5",
                        "--json", str(out), stdout=write_end, timeout=90, grace=0)
    finally:
        os.close(write_end)
    assert not done.timed_out, "meshcomm bench with its reader gone did not finish in 90 s"
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert [row["bytes"] for row in lines_of(out)] == [8, 1024]


ORPHAN_MAKER = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"],
    start_new_session=True, stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(60)
"""


def test_an_interrupted_mpiexec_leaves_no_process_of_its_job_behind() -> None:
    """Hydra's ranks live in sessions of their own; a stand-in whose 'rank' ignores SIGTERM and outlives it."""
    from meshcomm.bench import runner

    job = f"test-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, **{runner._JOB_VARIABLE: job})
    with started([sys.executable, "-c", ORPHAN_MAKER], env=env, stdout=subprocess.PIPE, text=True) as proc:
        orphan = int(proc.stdout.readline())
        runner._stop_mpiexec(proc, job)
    assert proc.returncode is not None
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{orphan}") and _is_running(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _is_running(orphan)
    if alive:
        os.kill(orphan, signal.SIGKILL)
    assert not alive, "the job's detached process outlived the stop"


def _is_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

"""python -m meshcomm.mpi.suite: run mpi4py's own tests on meshcomm.MPI (or on real mpi4py) at several sizes.

The tests come from mpi4py's source distribution on PyPI (downloaded once
into a cache). For meshcomm, a stand-in `mpi4py` package (suite/shim) that
makes `mpi4py.MPI` be `meshcomm.MPI` goes first on the test processes'
PYTHONPATH, and `meshcomm run -n N` starts them; for the comparison,
`mpiexec -n N` starts them on the installed mpi4py. Each rank writes its
outcomes; a test passes when it passed on every rank.

Exit status: 0 all selected tests passed, 1 some failed, 3 the tests could
not be obtained (PyPI unreachable and nothing cached).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

MPI4PY_VERSION = "4.1.2"
HERE = pathlib.Path(__file__).resolve().parent
SHIM = HERE / "shim"
RANK_RUNNER = HERE / "rank_runner.py"

# The files the default run covers, with the test_comm cases it runs (the others need what the face leaves out).
CORE_FILES: dict[str, list[str]] = {
    "test_cco_obj": [],
    "test_dynproc": [],
    "test_cco_buf": [],
    "test_cco_vec": [],
    "test_p2p_obj": [],
    "test_cco_nb_buf": [],
    "test_cco_nb_vec": [],
    "test_cco_pr_buf": [],
    "test_cco_pr_vec": [],
    "test_group": [],
    "test_comm_topo": [],
    "test_cco_ngh_obj": [],
    "test_cco_ngh_buf": [],
    "test_cco_pr_ngh_buf": [],
    "test_comm": ["testSize", "testRank", "testSplit", "testCloneFree"],
    "test_p2p_buf": [],
    "test_p2p_buf_matched": [],
    "test_p2p_obj_matched": [],
    "test_p2p_buf_part": [],
    "test_status": [],
    "test_request": [],
    "test_grequest": [],
    "test_msgzero": [],
    "test_util_sync": [],
    "test_util_pkl5": [],
    "test_util_pool": [],
    "test_subclass": [],
    "test_buffer": [],
    "test_msgspec": [],
    "test_handle": [],
    "test_exceptions": [],
    "test_session": [],
    "test_file": [],
    "test_io": [],
    "test_ulfm": [],
}

# Tests left out, each with why: features outside the MPI face's scope,
# or mpi4py's private internals.
EXCLUDED: dict[str, str] = {
    "testCommLock": "mpi4py's private internals (MPI._comm_lock_table)",
    "testGetInclude": "mpi4py's C headers: meshcomm.MPI is pure Python and has no C API to include",
    "testCython": "mpi4py's packaging (Cython .pxd files)",
    "testHeaders": "mpi4py's packaging (C headers)",
    "testTyping": "mpi4py's packaging (a .pyi stub beside each compiled module)",
    "testImportMPIABI": "mpi4py's loader for MPI libraries of several ABIs (_mpiabi)",
    "testGetFromString": "mpi4py's MPI ABI loader (_mpiabi)",
    "testGetFromLibMPI": "mpi4py's MPI ABI loader (_mpiabi)",
    "testString": "mpi4py's MPI ABI loader (_mpiabi)",
    "testLibMPI": "mpi4py's MPI ABI loader (_mpiabi)",
    "testSuffix": "mpi4py's MPI ABI loader (_mpiabi)",
    "testFinder": "mpi4py's MPI ABI loader (_mpiabi)",
    "testVerboseInfo": "mpi4py's MPI ABI loader (_mpiabi)",
    "testDLOpen": "mpi4py's MPI ABI loader (_mpiabi)",
    "testSizeOf": "mpi4py's private C-level helper MPI._sizeof (the size of a C handle)",
    "testAddressOf": "mpi4py's private C-level helper MPI._addressof (the address of a C handle)",
    "testAHandleOf": "mpi4py's private C-level helper MPI._handleof",
    "testHandleAdress": "writes a C handle into memory at MPI._addressof with ctypes: meshcomm's handles are Python objects",
    "testHandleValue": "reads a C handle from memory at MPI._addressof with ctypes: meshcomm's handles are Python objects",
}


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "meshcomm"


def test_dir() -> pathlib.Path | None:
    """mpi4py's test/ directory from the cached sdist, downloading it first if needed; None if unreachable."""
    root = cache_dir() / f"mpi4py-{MPI4PY_VERSION}"
    tests = root / "test"
    if (tests / "mpiunittest.py").exists():
        return tests
    with tempfile.TemporaryDirectory() as download:
        base = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                f"mpi4py=={MPI4PY_VERSION}", "-d", download, "--quiet"]
        # Without build isolation pip need not install a build backend just to read the version.
        for extra in (["--no-build-isolation"], []):
            done = subprocess.run(base + extra, capture_output=True, text=True, timeout=600)
            if done.returncode == 0:
                break
        else:
            print(f"could not download mpi4py {MPI4PY_VERSION} from PyPI:\n{done.stderr.strip()[-800:]}",
                  file=sys.stderr)
            return None
        archive = next(pathlib.Path(download).glob("mpi4py-*.tar.gz"))
        staging = pathlib.Path(tempfile.mkdtemp(dir=cache_dir() if cache_dir().exists() else None))
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(f"mpi4py-{MPI4PY_VERSION}/test/")]
            tar.extractall(staging, members=members, filter="data")
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tests, ignore_errors=True)
        (staging / f"mpi4py-{MPI4PY_VERSION}" / "test").rename(tests)
        shutil.rmtree(staging, ignore_errors=True)
    return tests


def _command(impl: str, nranks: int, runner_args: list[str]) -> list[str]:
    program = [sys.executable, str(RANK_RUNNER), *runner_args]
    if impl == "meshcomm":
        return [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--", *program]
    return ["mpiexec", "-n", str(nranks), *program]


def _environment(impl: str, tests: pathlib.Path, op_timeout: float) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(tests)] + ([str(SHIM)] if impl == "meshcomm" else []) + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["MESHCOMM_TIMEOUT"] = str(op_timeout)
    return env


def run_file(impl: str, tests: pathlib.Path, name: str, nranks: int, only: list[str], timeout: float,
             op_timeout: float) -> dict:
    """Outcome counts of one file at one size: {'pass', 'fail', 'skip', 'error': str, 'failed': [(test id,
    [(rank, [the text of each failure]), ...]), ...]}."""
    with tempfile.TemporaryDirectory() as results:
        prefix = os.path.join(results, "rank")
        args = [str(tests / f"{name}.py"), prefix, "--exclude", *EXCLUDED, "--only", *only]
        # A session of its own, so a file that runs out of time takes its ranks with it, not just the launcher.
        proc = subprocess.Popen(_command(impl, nranks, args), cwd=tests, env=_environment(impl, tests, op_timeout),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=timeout)
            error = "" if proc.returncode == 0 else f"exit status {proc.returncode}: {stderr.strip()[-1500:]}"
        except subprocess.TimeoutExpired:
            error = f"did not finish within {timeout:.0f} s"
        finally:
            if proc.returncode is None:  # out of time, or the suite itself interrupted
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        per_rank = []
        for rank in range(nranks):
            path = pathlib.Path(f"{prefix}.{rank}.json")
            per_rank.append(json.loads(path.read_text()) if path.exists() else None)
    return _combine(per_rank, error)


_NOT_RUN = ("fail", ("not run on this rank",))


def _combine(per_rank: list[dict | None], error: str) -> dict:
    counts = {"pass": 0, "fail": 0, "skip": 0, "failed": [], "error": error}
    if any(r is None for r in per_rank):
        counts["error"] = error or "a rank wrote no results"
        counts["fail"] += 1
        return counts
    for test_id, (outcome, _) in per_rank[0].items():
        accounts = [r.get(test_id, _NOT_RUN) for r in per_rank]
        if any(account[0] == "fail" for account in accounts):
            counts["fail"] += 1
            # Every failing rank's failures: the rank that failed first need not be rank 0.
            counts["failed"].append((test_id, [(rank, texts) for rank, (kind, texts) in enumerate(accounts)
                                               if kind == "fail"]))
        elif outcome == "skip":
            counts["skip"] += 1
        else:
            counts["pass"] += 1
    return counts


def failure_summary(report: dict) -> str:
    """A line per file and size that failed, then one per failing test and rank: the last line of its account."""
    lines = []
    for name, row in report.items():
        for n, counts in row.items():
            if not counts["fail"]:
                continue
            lines.append(f"failed: {name} at N={n}" + (f": {counts['error'][:400]}" if counts["error"] else ""))
            for test_id, failing in counts["failed"]:
                for rank, texts in failing:  # each failure's last line (a test and its tearDown may both fail)
                    lasts = [(text.strip().splitlines() or [""])[-1][:300] for text in texts]
                    lines.append(f"    {test_id}, rank {rank}: " + "; then ".join(lasts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshcomm.mpi.suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="test files (e.g. test_cco_obj); default: the core files")
    parser.add_argument("--impl", choices=("meshcomm", "mpi4py"), default="meshcomm",
                        help="meshcomm.MPI through the shim, or the installed mpi4py under mpiexec")
    parser.add_argument("-n", "--sizes", type=int, nargs="+", default=[1, 2, 3], help="numbers of ranks")
    parser.add_argument("--all", action="store_true", help="every test_*.py file of the suite")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one file may take at one size")
    parser.add_argument("--op-timeout", type=float, default=60, help="MESHCOMM_TIMEOUT for the ranks")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each failure's traceback")
    options = parser.parse_args(argv)
    tests = test_dir()
    if tests is None:
        return 3
    if options.all:
        selection = {p.stem: CORE_FILES.get(p.stem, []) for p in sorted(tests.glob("test_*.py"))}
    elif options.files:
        selection = {f.removesuffix(".py"): CORE_FILES.get(f.removesuffix(".py"), []) for f in options.files}
    else:
        selection = dict(CORE_FILES)
    print(f"mpi4py {MPI4PY_VERSION} tests from {tests}, on {options.impl}")
    print(f"{'file':<22}" + "".join(f"{f'N={n} pass/fail/skip':>24}" for n in options.sizes))
    report, failures, started = {}, 0, time.monotonic()
    for name, only in selection.items():
        row = {}
        for n in options.sizes:
            row[n] = run_file(options.impl, tests, name, n, only, options.timeout, options.op_timeout)
            failures += row[n]["fail"]
        report[name] = row
        print(f"{name:<22}" + "".join(f"{'%d/%d/%d' % (c['pass'], c['fail'], c['skip']):>24}" for c in row.values()),
              flush=True)
        for n, counts in row.items():
            if counts["error"]:
                print(f"    N={n}: {counts['error'][:400]}")
            for test_id, failing in counts["failed"]:
                print(f"    N={n} FAIL {test_id}")
                if options.verbose:
                    print("\n".join(f"rank {rank}:\n" + "\nthen:\n".join(texts) for rank, texts in failing))
    elapsed = time.monotonic() - started
    print(f"wall time {elapsed:.1f} s; excluded: " + "; ".join(f"{k} ({v})" for k, v in EXCLUDED.items()))
    summary = failure_summary(report)
    if summary:  # again at the end, where a log cut short in its middle still shows it
        print(summary)
    if options.json:
        pathlib.Path(options.json).write_text(json.dumps({"impl": options.impl, "seconds": elapsed,
                                                          "results": report}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Table rows, the side-by-side comparison, the progress bar, --algo and missing rivals (no processes)."""

from __future__ import annotations

import io
import re

import pytest

from meshcomm.bench import report, runner
from meshcomm.cli.main import main


def record(lib: str, nbytes: int, time_us: float, coll: str = "all_reduce", wrong: int | None = 0) -> dict:
    return {"lib": lib, "coll": coll, "ranks": 2, "bytes": nbytes, "count": nbytes // 4, "dtype": "float32",
            "op": "sum", "root": -1, "algo": None, "iters": 10, "time_us": time_us,
            "algbw_GBps": nbytes / time_us / 1e3, "busbw_GBps": nbytes / time_us / 1e3, "wrong": wrong,
            "version": f"{lib} 1.0"}


def test_a_row_has_nccl_tests_columns() -> None:
    fields = report.row(record("meshcomm", 1024, 12.345)).split()
    assert fields == ["1024", "256", "float32", "sum", "-1", "12.35", "0.08", "0.08", "0"]
    assert report.row(record("meshcomm", 8, 150.0, wrong=None)).split()[-1] == "N/A"
    assert report.header_lines()[0].split()[-1] == "#wrong"
    assert report.format_time(12345.6) == "12346" and report.format_time(123.45) == "123.5"


def test_the_footer_averages_bus_bandwidth() -> None:
    rows = [record("meshcomm", 1000, 1.0), record("meshcomm", 3000, 1.0)]
    assert report.footer(rows) == "# Avg bus bandwidth    : 2.000"


def test_the_comparison_puts_libraries_side_by_side_with_time_ratios() -> None:
    rows = [record("meshcomm", 8, 20.0), record("gloo", 8, 40.0), record("mpich", 8, 2.0),
            record("meshcomm", 1024, 30.0), record("gloo", 1024, 60.0)]
    lines = report.comparison(rows, ["meshcomm", "gloo", "mpich"])
    header = next(line for line in lines if "meshcomm/gloo" in line)
    assert header.split()[:4] == ["#", "size", "meshcomm", "us"]
    body = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    assert body[0][0] == "8" and body[0][5] == "0.50" and body[0][-1] == "10.00"
    assert body[1][0] == "1024" and body[1][-3:] == ["-", "-", "-"]  # no mpich row at 1 KiB
    markdown = report.comparison(rows, ["meshcomm", "gloo", "mpich"], markdown=True)
    assert "| 1 KiB | 30.00 | 0.03 | 60.00 | 0.02 | 0.50 | - | - | - |" in markdown


def test_rows_move_the_progress_bar_and_are_forwarded_above_it() -> None:
    bar, out = io.StringIO(), io.StringIO()
    progress = report.Progress(2, bar)
    stream = report.RowStream(out, progress)
    stream.write("# header\n   8  2  float32")
    stream.write("  sum\n  16 4 float32 sum\n")
    assert out.getvalue() == "# header\n   8  2  float32  sum\n  16 4 float32 sum\n"
    assert progress.done == 2 and "2/2 rows" in bar.getvalue()
    quiet = report.RowStream(None, report.Progress(1, io.StringIO()))
    quiet.write("1 2 3\n")


def test_algo_applies_a_name_to_every_chosen_collective_that_has_it() -> None:
    assert runner.algorithms_for("ring", ["all_reduce", "broadcast", "all_gather"]) == {
        "all_reduce": "ring", "all_gather": "ring"}
    assert runner.algorithms_for("all_reduce:recursive_doubling,broadcast:chain", ["all_reduce"]) == {
        "all_reduce": "recursive_doubling", "broadcast": "chain"}
    assert runner.algorithms_for(None, ["all_reduce"]) == {}
    with pytest.raises(ValueError, match="none of broadcast has an algorithm of that name"):
        runner.algorithms_for("ring", ["broadcast"])
    with pytest.raises(ValueError, match="broadcast has no algorithm 'ring'; choose one of: binomial, chain"):
        runner.algorithms_for("broadcast:ring", ["broadcast"])


def test_a_comparison_runs_in_rounds_of_sizes() -> None:
    sizes = [8 << i for i in range(24)]
    chunks = runner.rounds(sizes)
    assert [len(c) for c in chunks] == [6, 6, 6, 6] and sum(chunks, []) == sizes


def test_missing_rivals_are_named_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda name: None)
    assert runner.missing("gloo") == "torch is not installed (pip install torch==2.13.0)"
    assert runner.missing("mpich") == ("mpi4py is not installed (apt-get install -y mpich libmpich-dev && "
                                       "pip install --no-binary mpi4py mpi4py)")
    assert runner.missing("meshcomm") is None
    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    assert runner.missing("mpich-yield") == "mpiexec is not on PATH (apt-get install -y mpich libmpich-dev)"


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["bench", "--sizes", "8", "--plot", "out.png"]) == 2
    assert 'pip install "meshcomm[viz]"' in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--sizes", "64M:8"], "MIN <= MAX"), (["all_reduce,allgather"], "comma-separated list of"),
     (["-n", "2", "--root", "2"], r"--root must be in \[0, 2\)"), (["--algo", "chain"], "none of all_reduce")],
)
def test_bad_arguments_exit_2_with_the_rule(argv: list[str], message: str, capsys) -> None:
    assert main(["bench", *argv]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_libraries_take_turns_going_first_round_by_round() -> None:
    jobs = list(runner.interleaved(["all_reduce"], [[8], [16], [32]], ["meshcomm", "gloo", "mpich"]))
    assert [lib for _, _, lib in jobs] == ["meshcomm", "gloo", "mpich", "gloo", "mpich", "meshcomm",
                                           "mpich", "meshcomm", "gloo"]
    assert {tuple(chunk) for _, chunk, _ in jobs} == {(8,), (16,), (32,)}

"""`meshcomm tune`: measures on real ranks and writes a file MESHCOMM_TUNING can load."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.bench.sizes import COLLECTIVES
from meshcomm.cli import tune
from meshcomm.cli.main import main
from meshcomm.tuner import load


def test_tune_writes_a_loadable_file_and_says_how_to_use_it(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "tuning.json")
    assert main(["tune", "-n", "2", "-o", path, "--budget", "0.01"]) == 0
    parameters = load(path)
    assert parameters.same_host.alpha > 0 and parameters.other_host.alpha > 0 and parameters.gamma > 0
    out = capsys.readouterr().out
    assert f"export MESHCOMM_TUNING={path}" in out
    assert "same_host" in out and "other_host" in out
    # The board's fixed cost is measured too, and saved as printed.
    board = next(line for line in out.splitlines() if line.startswith("board "))
    assert "(8 B all_reduce, direct, on 2 ranks: " in board
    assert f"{parameters.board * 1e6:6.1f} µs per small call" in board


def test_tune_needs_two_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "-n", "1"]) == 2
    assert "-n must be at least 2" in capsys.readouterr().err


@pytest.mark.slow
def test_tune_with_choices_records_the_fastest_algorithm_per_collective_and_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "tuning.json")
    assert main(["tune", "-n", "2", "-o", path, "--budget", "0.01", "--choices", "2", "--choice-sizes", "1K",
                 "--choice-runs", "1"]) == 0
    choices = load(path).choices
    assert {row.collective for row in choices} == set(COLLECTIVES) - {"pingpong"}
    assert all(row.nranks == 2 and row.algorithm in ALGORITHMS[row.collective] for row in choices)
    # Payload bytes, as the chooser counts them: all_to_all's 1 KiB row moves 2 KiB in all.
    assert {row.collective: row.nbytes for row in choices}["all_to_all"] == 2048
    assert "measured    all_reduce on 2 ranks: 1 KiB " in capsys.readouterr().out


@pytest.mark.parametrize("value", ["1", "2,x", ","])
def test_tune_choices_must_be_group_sizes_of_two_or_more(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--choices", value]) == 2
    assert "argument --choices" in capsys.readouterr().err


def test_tune_keeps_the_median_of_an_algorithms_runs_not_its_one_lucky_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # ring: one run at 1 µs, two at 10 µs; recursive doubling always 5 µs. The fastest run would pick ring.
    runs_us = {"ring": iter([1.0, 10.0, 10.0])}
    monkeypatch.setattr("meshcomm.bench.sizes.COLLECTIVES", ("all_reduce",))

    def fake_bench(spec, nproc: int) -> list[dict]:
        (algorithm,) = spec.algos.values()
        return [{"bytes": 1024, "time_us": next(runs_us[algorithm]) if algorithm in runs_us else 5.0}]

    monkeypatch.setattr(tune, "_bench", fake_bench)
    (row,) = tune._measure_choices([4], [1024], runs=3, budget=0.01)
    assert (row.collective, row.nranks, row.nbytes, row.algorithm) == ("all_reduce", 4, 1024, "recursive_doubling")

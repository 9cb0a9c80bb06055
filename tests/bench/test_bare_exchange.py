"""benchmarks/bare_exchange.py: two processes swap bytes both ways the board can, and get each other's bytes."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from meshcomm.transport import cma

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bare_exchange.py"


@pytest.fixture(scope="module")
def bare():
    spec = importlib.util.spec_from_file_location("bare_exchange", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("how", ["slot", "readv"])
def test_each_process_receives_the_other_s_bytes(bare, how) -> None:
    if how == "readv" and not cma.expected_between_siblings():
        pytest.skip("this host does not let a child read its parent's memory")
    # exchange() checks the bytes received after the last round; a wrong byte raises, in either process.
    for size in (1, 4096, 300_000):
        assert bare.measure(size, 20, how) > 0


def test_the_table_has_a_row_per_size(bare, capsys) -> None:
    bare.main(["--sizes", "1K,8K", "--rounds", "5"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert [int(row[0]) for row in rows] == [1024, 8192]
    assert all(float(cell) > 0 for row in rows for cell in row[1:])


def test_bad_sizes_are_refused_before_anything_runs(bare, capsys) -> None:
    with pytest.raises(SystemExit):
        bare.main(["--sizes", "12Q"])
    assert "--sizes" in capsys.readouterr().err

"""Measured choices: which row governs a call, the fastest per point, and the table in a tuning file."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from meshcomm.tuner import DEFAULTS, load, save
from meshcomm.tuner.table import Measured, fastest, lookup

TABLE = (
    Measured("all_reduce", 4, 8, "recursive_doubling"),
    Measured("all_reduce", 4, 1 << 20, "rabenseifner"),
    Measured("all_reduce", 4, 16 << 20, "ring"),
    Measured("broadcast", 2, 8, "chain"),
)


@pytest.mark.parametrize("nbytes, expected", [
    (8, "recursive_doubling"),              # measured here
    (4, "recursive_doubling"),              # below the smallest measured size
    (64 << 10, "recursive_doubling"),       # between sizes: the lower one's rule
    ((1 << 21) - 1, "rabenseifner"),        # the same power-of-two bucket as 1 MiB
    (1 << 21, "rabenseifner"),
    (1 << 30, "ring"),                      # above the largest
])
def test_a_measured_choice_holds_from_its_size_up_to_the_next(nbytes: int, expected: str) -> None:
    assert lookup(TABLE, "all_reduce", 4, nbytes).algorithm == expected


def test_an_unmeasured_group_size_or_collective_has_no_row() -> None:
    assert lookup(TABLE, "all_reduce", 8, 8) is None
    assert lookup(TABLE, "all_gather", 4, 8) is None
    assert lookup((), "all_reduce", 4, 8) is None


def test_fastest_keeps_each_points_quickest_algorithm_ties_in_registry_order() -> None:
    rows = fastest({
        ("all_reduce", 2, 8): {"ring": 3e-5, "recursive_doubling": 2e-5},
        ("all_gather", 2, 1024): {"bruck": 5e-5, "ring": 5e-5},
    })
    assert rows == (Measured("all_gather", 2, 1024, "ring"), Measured("all_reduce", 2, 8, "recursive_doubling"))


def test_a_table_survives_save_and_load(tmp_path: Path) -> None:
    path = str(tmp_path / "tuning.json")
    tuned = replace(DEFAULTS, choices=TABLE)
    save(tuned, path)
    assert load(path).choices == TABLE
    assert json.loads(Path(path).read_text())["choices"]["all_reduce"]["4"]["1048576"] == "rabenseifner"


def test_a_file_without_a_table_loads_with_none(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(replace(DEFAULTS, choices=()).to_json())
    assert "choices" not in json.loads(path.read_text())
    assert load(str(path)).choices == ()


@pytest.mark.parametrize("choices, message", [
    ([], " must be an object"),
    ({"allreduce": {}}, "unknown collective 'allreduce'"),
    ({"all_reduce": {"one": {"8": "ring"}}}, "all_reduce: group size must be an integer >= 2, got 'one'"),
    ({"all_reduce": {"4": {}}}, "all_reduce on 4 ranks must map bytes to an algorithm"),
    ({"all_reduce": {"4": {"-8": "ring"}}}, "all_reduce on 4 ranks: size must be an integer >= 0, got '-8'"),
    ({"all_reduce": {"4": {"8": "chain"}}}, "all_reduce on 4 ranks at 8 B names unknown algorithm 'chain'"),
])
def test_a_bad_table_names_the_file_and_the_entry(tmp_path: Path, choices: object, message: str) -> None:
    raw = json.loads(DEFAULTS.to_json())
    raw["choices"] = choices
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=f"tuning file {path}: choices.*{re.escape(message)}"):
        load(str(path))

"""The worker's settings, iteration counts and row plan (no processes)."""

from __future__ import annotations

import json

import pytest

from meshcomm.bench.sizes import layout
from meshcomm.bench.worker import (
    MAX_ITERS,
    MIN_ITERS,
    Spec,
    budget_iterations,
    default_warmup,
    nominal_iterations,
    planned_rows,
    skip_reason,
)


def test_iterations_shrink_with_size_between_the_bounds() -> None:
    assert nominal_iterations(8) == MAX_ITERS
    assert nominal_iterations(64 << 20) == 16
    assert nominal_iterations(1 << 30) == MIN_ITERS
    counts = [nominal_iterations(8 << i) for i in range(24)]
    assert counts == sorted(counts, reverse=True)
    assert all(2 <= default_warmup(8 << i) <= 20 for i in range(24))


def test_slow_calls_get_fewer_iterations_but_never_below_the_minimum() -> None:
    assert budget_iterations(1000, 20e-6, 1.0) == 1000
    assert budget_iterations(1000, 12e-3, 1.0) == 83  # an oversubscribed MPICH call
    assert budget_iterations(1000, 5.0, 1.0) == MIN_ITERS
    assert budget_iterations(1000, 0.0, 1.0) == 1000


def test_spec_round_trips_through_json_and_rejects_unknown_keys() -> None:
    spec = Spec(lib="gloo", colls=["all_gather"], sizes=[8, 1024], check=True, algos={"all_reduce": "ring"})
    assert Spec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match=r"unknown worker setting\(s\) \['colour'\]"):
        Spec.from_json(json.dumps({"colour": "red"}))


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"lib": "nccl"}, "lib must be one of"), ({"colls": ["allreduce"]}, "unknown collective 'allreduce'"),
     ({"dtype": "bfloat16"}, "dtype must be one of"), ({"op": "avg", "dtype": "int32"}, "op avg needs a floating"),
     ({"iters": 0}, "iters must be >= 1"), ({"root": -1}, "root must be >= 0"), ({"sizes": [0]}, "sizes must be >= 1")],
)
def test_bad_settings_raise_value_errors_naming_them(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Spec(**settings)


def test_the_plan_counts_rows_and_skips_what_cannot_run() -> None:
    assert skip_reason(layout("pingpong", 8, 1, 4), 1, "float32") == "pingpong needs 2 ranks"
    assert "less than one float32 per rank" in skip_reason(layout("all_gather", 8, 4, 4), 4, "float32")
    spec = Spec(colls=["all_reduce", "all_gather"], sizes=[8, 16, 1024])
    assert planned_rows(spec, 2) == 6
    assert planned_rows(spec, 4) == 3 + 2  # all_gather of 8 B has no float per rank on 4 ranks

"""Known inputs and expected results agree with a reference run of every collective, and the checker sees corruption."""

from __future__ import annotations

import numpy as np
import pytest

from meshcomm.bench import data
from meshcomm.bench.sizes import REDUCING, layout

UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def reference(coll: str, ins: list[np.ndarray], root: int, op: str | None, dtype: np.dtype) -> list[np.ndarray | None]:
    """What each rank's receive buffer holds after a correct `coll`, computed from all ranks' inputs."""
    n = len(ins)
    if coll in REDUCING:
        stack = np.stack(ins)
        if op == "avg":
            total = (stack.astype(np.float64).sum(axis=0) / n).astype(dtype)
        else:
            total = UFUNCS[op].reduce(stack, axis=0, dtype=dtype)
        if coll == "all_reduce":
            return [total] * n
        if coll == "reduce":
            return [total if r == root else None for r in range(n)]
        return list(np.split(total, n))  # reduce_scatter
    if coll == "broadcast":
        return [ins[root]] * n
    if coll == "pingpong":
        return [ins[0], ins[0]] + [None] * (n - 2)
    if coll == "all_gather":
        return [np.concatenate(ins)] * n
    if coll == "gather":
        return [np.concatenate(ins) if r == root else None for r in range(n)]
    if coll == "scatter":
        return list(np.split(ins[root], n))
    if coll == "all_to_all":
        blocks = [np.split(x, n) for x in ins]
        return [np.concatenate([blocks[src][dst] for src in range(n)]) for dst in range(n)]
    raise AssertionError(coll)


CASES = [
    (coll, op, n, dtype)
    for coll, op in [(c, o) for c in ("all_reduce", "reduce", "reduce_scatter") for o in data.OPS]
    + [(c, None) for c in ("broadcast", "all_gather", "all_to_all", "gather", "scatter", "pingpong")]
    for n in (1, 2, 3, 5)
    for dtype in ("int8", "uint8", "float16", "float32", "int64")
    if not (op == "avg" and dtype[0] != "f") and not (coll == "pingpong" and n < 2)
]


@pytest.mark.parametrize(("coll", "op", "n", "dtype_name"), CASES)
def test_expected_matches_a_reference_collective_on_the_known_inputs(coll, op, n, dtype_name) -> None:
    dtype = np.dtype(dtype_name)
    root = n - 1 if coll != "pingpong" else 0
    lay = layout(coll, 4000 * dtype.itemsize, n, dtype.itemsize)
    bufs = [data.allocate(lay, r, root, dtype, op) for r in range(n)]
    want = reference(coll, [b.send for b in bufs], root, op, dtype)
    for rank in range(n):
        got = data.expected(lay, rank, root, dtype, op)
        if want[rank] is None:
            assert got is None
        else:
            assert got is not None and data.count_wrong(got, want[rank]) == 0, (coll, rank)


def test_inputs_tell_ranks_and_positions_apart() -> None:
    dtype = np.dtype("int32")
    a, b = data.values(0, 0, 1000, dtype, None), data.values(1, 0, 1000, dtype, None)
    assert np.count_nonzero(a == b) == 0
    assert len(set(a[:251].tolist())) == 251


def test_the_checker_counts_every_corrupted_element() -> None:
    lay = layout("all_reduce", 4096, 4, 4)
    want = data.expected(lay, 0, -1, np.dtype("float32"), "sum")
    got = want.copy()
    assert data.count_wrong(got, want) == 0
    got[[3, 100, 1023]] += 1
    got[500] = np.nan
    assert data.count_wrong(got, want) == 4


def test_a_wrong_expected_value_is_detected() -> None:
    lay = layout("all_gather", 1024, 2, 1)
    dtype = np.dtype("int8")
    result = np.concatenate([data.allocate(lay, r, 0, dtype, None).send for r in range(2)])
    wrong_expectation = data.expected(lay, 0, 0, dtype, None).copy()
    wrong_expectation[7] += 1
    assert data.count_wrong(result, wrong_expectation) == 1


def test_floats_are_compared_within_the_dtype_tolerance_and_integers_exactly() -> None:
    want = np.full(4, 100.0, dtype=np.float16)
    assert data.count_wrong(want + np.float16(0.5), want) == 0  # 0.5 % of 100, within float16's 1 %
    assert data.count_wrong(np.full(4, 1.0 + 1e-4, np.float32), np.ones(4, np.float32)) == 4
    assert data.count_wrong(np.array([1, 2], np.int64), np.array([1, 3], np.int64)) == 1


def test_shape_mismatch_and_bad_options_raise() -> None:
    with pytest.raises(ValueError, match="shape"):
        data.count_wrong(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="dtype must be one of"):
        data.check_dtype("complex64")
    with pytest.raises(ValueError, match="op avg needs a floating dtype, got int32"):
        data.check_op("avg", np.dtype("int32"))

"""Reduction operators as in-place numpy functions: combine(dst, src) leaves op(dst, src) in dst.

bfloat16 and float8 arrive as their raw bits (numpy has neither): they are
widened to float32, combined, and rounded back (narrow_floats.py).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from meshcomm.executor import narrow_floats

Combine = Callable[[np.ndarray, np.ndarray], None]

_NUMERIC = {
    "sum": np.add,
    "avg": np.add,  # divided by the group size afterwards
    "premul_sum": np.add,  # scaled by the factor afterwards (the sum is linear)
    "product": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
}
_BITWISE = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
_BOOL = {
    "sum": np.logical_or,
    "max": np.logical_or,
    "bor": np.logical_or,
    "product": np.logical_and,
    "min": np.logical_and,
    "band": np.logical_and,
    "bxor": np.logical_xor,
}


def combiner(op: str, dtype: np.dtype, logical: str | None = None) -> Combine:
    """The in-place combine for `op` on arrays of storage dtype `dtype`.

    Raises TypeError naming op and dtype for pairs that have no meaning
    (bitwise ops on floats, min/max on complex), before any data moves.
    """
    if logical is not None:
        ufunc = _NUMERIC.get(op)
        if ufunc is None:
            raise TypeError(f"op {op} is not defined for {logical}")
        widen, narrow = narrow_floats.converter(logical)

        def combine(dst: np.ndarray, src: np.ndarray) -> None:
            dst[...] = narrow(ufunc(widen(dst), widen(src)))

        return combine
    kind = dtype.kind
    if kind == "b":
        ufunc = _BOOL.get(op)
    elif op in _BITWISE:
        ufunc = _BITWISE[op] if kind in "iu" else None
    elif kind == "c" and op in ("min", "max"):
        ufunc = None
    else:
        ufunc = _NUMERIC.get(op)
    if ufunc is None:
        raise TypeError(f"reduce op {op} is not defined for dtype {logical or dtype}")
    return lambda dst, src: ufunc(dst, src, out=dst)

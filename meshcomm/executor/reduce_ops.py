"""Reduction operators as in-place numpy functions: combine(dst, src) leaves op(dst, src) in dst.

bfloat16 arrives as its 16-bit storage (numpy has no bfloat16): it is widened
to float32, combined, and rounded back to nearest-even, so no optional
package is needed to reduce it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

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
    if logical == "bfloat16":
        ufunc = _NUMERIC.get(op)
        if ufunc is None:
            raise TypeError(f"op {op} is not defined for bfloat16")
        return lambda dst, src: _bf16_combine(ufunc, dst, src)
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


def _bf16_widen(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _bf16_narrow(values: np.ndarray) -> np.ndarray:
    bits = values.view(np.uint32)
    rounded = bits + (0x7FFF + ((bits >> 16) & 1))
    narrow = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        narrow[nan] = 0x7FC0
    return narrow


def _bf16_combine(ufunc, dst: np.ndarray, src: np.ndarray) -> None:
    dst[...] = _bf16_narrow(ufunc(_bf16_widen(dst), _bf16_widen(src)))

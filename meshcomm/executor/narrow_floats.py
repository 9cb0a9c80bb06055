"""Floating types numpy lacks (bfloat16, float8): moved as their raw bits, reduced in float32.

A buffer of such a type travels as unsigned integers of its width, so moving
it needs nothing. Reducing it widens both sides to float32, combines, and
rounds back. bfloat16 is the top half of a float32, so that is done with bit
operations and needs no package; the float8 formats (torch's and ml_dtypes'
names) have odd exponent widths and special values, so their conversions come
from ml_dtypes, which is imported only when a float8 buffer is reduced or
scaled, and whose absence is reported before any data moves.
"""

from __future__ import annotations

import numpy as np

FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
NARROW = ("bfloat16",) + FLOAT8


def storage(logical: str) -> np.dtype:
    """The unsigned integer type that carries `logical`'s bits."""
    return np.dtype(np.uint16 if logical == "bfloat16" else np.uint8)


def converter(logical: str):
    """(widen, narrow): raw bits -> float32 and back (nearest, ties to even). Checks ml_dtypes for float8."""
    if logical == "bfloat16":
        return _bf16_widen, _bf16_narrow
    if logical not in FLOAT8:
        raise TypeError(f"meshcomm does not know the floating type {logical!r}")
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(f"reducing {logical} needs the ml_dtypes package: pip install ml_dtypes "
                        "(moving it without reducing does not)") from None
    kind = np.dtype(getattr(ml_dtypes, logical))
    return (lambda bits: bits.view(kind).astype(np.float32)), (lambda values: values.astype(kind).view(np.uint8))


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

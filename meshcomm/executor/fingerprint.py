"""The 16-byte collective fingerprint carried by every collective message.

It packs what all ranks of a collective must agree on (which collective, the
dtype, the reduction, the root and the element count), so a rank that called
something else is caught at the first message with both calls spelled out.
"""

from __future__ import annotations

import struct

from meshcomm.algorithms.problem import COLLECTIVES
from meshcomm.executor.narrow_floats import FLOAT8

_FORMAT = struct.Struct("!BBBBIQ")
DTYPE_CODES = (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "longdouble",
    *FLOAT8,
)
OP_NAMES = ("none", "sum", "product", "min", "max", "band", "bor", "bxor", "avg", "premul_sum")


def pack(collective: str, dtype_name: str, op_name: str, root: int, count: int) -> bytes:
    return _FORMAT.pack(
        COLLECTIVES.index(collective) + 1,
        DTYPE_CODES.index(dtype_name) + 1 if dtype_name in DTYPE_CODES else 0,
        OP_NAMES.index(op_name),
        0,
        root,
        count,
    )


def describe(fingerprint: bytes) -> str:
    """Human words for a fingerprint: 'all_reduce(float32, 1024 elements, op=sum)'."""
    try:
        coll, dtype, op, _flags, root, count = _FORMAT.unpack(fingerprint)
        name = COLLECTIVES[coll - 1]
    except (struct.error, IndexError):
        return f"<unknown fingerprint {fingerprint.hex()}>"
    parts = [DTYPE_CODES[dtype - 1] if 0 < dtype <= len(DTYPE_CODES) else "?", f"{count} elements"]
    if op:
        parts.append(f"op={OP_NAMES[op] if op < len(OP_NAMES) else op}")
    if name in ("broadcast", "reduce", "gather", "scatter"):
        parts.append(f"root={root}")
    return f"{name}({', '.join(parts)})"


def fields(fingerprint: bytes) -> dict:
    """The fingerprint as named fields (collective, dtype, op, root, count), for dumps and tools."""
    try:
        coll, dtype, op, _flags, root, count = _FORMAT.unpack(fingerprint)
        return {
            "collective": COLLECTIVES[coll - 1],
            "dtype": DTYPE_CODES[dtype - 1] if 0 < dtype <= len(DTYPE_CODES) else "?",
            "op": OP_NAMES[op] if op < len(OP_NAMES) else str(op),
            "root": root,
            "count": count,
        }
    except (struct.error, IndexError):
        return {"collective": "?", "dtype": "?", "op": "?", "root": 0, "count": 0}

"""Known input values for every collective, the results they must give, and nccl-tests' "#wrong" count.

Every element is a small integer computed from (rank, position), so the
expected result is known without communicating: data-moving collectives use
(131 * rank + position) mod 251, which tells both the sender and the place
apart; reductions use 1 + (3 * rank + position) mod 8 (products 1 + (rank +
position) mod 2), small enough that sums over hundreds of ranks stay exact in
float16 and integer overflow wraps the same way in every library. The
patterns are periodic, so one period is computed and tiled, never a whole
64 MiB buffer per rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

import numpy as np

from meshcomm.bench.sizes import REDUCING, Layout

DTYPES: tuple[str, ...] = ("int8", "uint8", "int32", "int64", "float16", "float32", "float64")
OPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")

_MOVE_PERIOD = 251
_REDUCE_PERIOD = 8
_PROD_PERIOD = 2
_TOLERANCE = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}


def check_dtype(name: str) -> np.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return np.dtype(name)


def check_op(name: str, dtype: np.dtype) -> str:
    if name not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {name!r}")
    if name == "avg" and dtype.kind != "f":
        raise ValueError(f"op avg needs a floating dtype, got {dtype.name}")
    return name


def values(rank: int, start: int, count: int, dtype: np.dtype, op: str | None) -> np.ndarray:
    """Rank `rank`'s elements start .. start+count-1 (op None: a data-moving collective)."""
    if op is None:
        period, scale, base = _MOVE_PERIOD, 131, 0
    elif op == "prod":
        period, scale, base = _PROD_PERIOD, 1, 1
    else:
        period, scale, base = _REDUCE_PERIOD, 3, 1
    offset = (scale * rank + start) % period
    one_period = (base + (offset + np.arange(period, dtype=np.int64)) % period).astype(dtype)
    return np.resize(one_period, count)


def reduced(nranks: int, start: int, count: int, dtype: np.dtype, op: str) -> np.ndarray:
    """Elements start .. start+count-1 of the reduction over ranks 0 .. nranks-1 of values()."""
    period = lcm(_REDUCE_PERIOD, _PROD_PERIOD)
    stack = np.stack([values(r, start, period, dtype, op) for r in range(nranks)])
    if op == "avg":
        one_period = (stack.astype(np.float64).sum(axis=0) / nranks).astype(dtype)
    else:
        ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
        one_period = ufunc.reduce(stack, axis=0, dtype=dtype)
    return np.resize(one_period, count)


def count_wrong(got: np.ndarray, expected: np.ndarray) -> int:
    """Elements of `got` that differ from `expected` (floats within the dtype's tolerance; NaN is wrong)."""
    if got.shape != expected.shape:
        raise ValueError(f"got has shape {got.shape} but expected has {expected.shape}")
    if got.dtype.kind == "f":
        tol = _TOLERANCE.get(got.dtype.name, 1e-5)
        close = np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=0.0)
        return int(close.size - np.count_nonzero(close))
    return int(np.count_nonzero(got != expected))


@dataclass
class Buffers:
    """One rank's send and receive buffers; for in-place collectives they are the same array."""

    send: np.ndarray
    recv: np.ndarray


def allocate(lay: Layout, rank: int, root: int, dtype: np.dtype, op: str | None) -> Buffers:
    """Buffers for one (collective, size) point, filled with the known inputs (op: the reduction, or None)."""
    coll, n, c = lay.collective, lay.nranks, lay.count
    if coll in REDUCING and op is None:
        raise ValueError(f"{coll} needs a reduction op")
    if coll in ("all_reduce", "reduce"):
        buf = values(rank, 0, c, dtype, op)
        return Buffers(buf, buf)
    if coll == "broadcast":
        buf = values(root, 0, c, dtype, None) if rank == root else np.zeros(c, dtype)
        return Buffers(buf, buf)
    if coll == "pingpong":
        buf = values(0, 0, c, dtype, None) if rank == 0 else np.zeros(c, dtype)
        return Buffers(buf, buf)
    if coll == "reduce_scatter":
        return Buffers(values(rank, 0, c * n, dtype, op), np.zeros(c, dtype))
    if coll == "all_to_all":
        # Block j goes to rank j; it holds this rank's values at positions j*c ... (j+1)*c - 1.
        send = np.concatenate([values(rank, j * c, c, dtype, None) for j in range(n)])
        return Buffers(send, np.zeros(c * n, dtype))
    if coll in ("all_gather", "gather"):
        recv = np.zeros(c * n if coll == "all_gather" or rank == root else 0, dtype)
        return Buffers(values(rank, 0, c, dtype, None), recv)
    if coll == "scatter":
        send = np.concatenate([values(j, 0, c, dtype, None) for j in range(n)]) if rank == root else np.zeros(0, dtype)
        return Buffers(send, np.zeros(c, dtype))
    raise ValueError(f"no buffers for collective {coll!r}")


def expected(lay: Layout, rank: int, root: int, dtype: np.dtype, op: str | None) -> np.ndarray | None:
    """What `recv` must hold after one call on fresh buffers; None where the result is undefined.

    reduce and gather define a result on the root only (torch's gloo leaves
    partial sums on other ranks), as nccl-tests checks them.
    """
    coll, n, c = lay.collective, lay.nranks, lay.count
    if coll in REDUCING and op is None:
        raise ValueError(f"{coll} needs a reduction op")
    if coll == "all_reduce" or (coll == "reduce" and rank == root):
        return reduced(n, 0, c, dtype, op)
    if coll == "reduce_scatter":
        return reduced(n, rank * c, c, dtype, op)
    if coll == "broadcast":
        return values(root, 0, c, dtype, None)
    if coll == "pingpong":
        return values(0, 0, c, dtype, None) if rank < 2 else None
    if coll == "all_to_all":
        return np.concatenate([values(j, rank * c, c, dtype, None) for j in range(n)])
    if coll == "all_gather" or (coll == "gather" and rank == root):
        return np.concatenate([values(j, 0, c, dtype, None) for j in range(n)])
    if coll == "scatter":
        return values(rank, 0, c, dtype, None)
    return None


def op_for(collective: str, op: str) -> str | None:
    """The reduction a collective applies (None for data movement)."""
    return op if collective in REDUCING else None

"""Reduction operations: one Op applies to pickled objects (lowercase calls) and to numpy buffers.

Ops that meshcomm's collectives reduce natively (sum, product, min, max and
the bitwise ones on integers) run in the collective itself; the others
(logical ops, MAXLOC/MINLOC, REPLACE, NO_OP, user functions) gather the
contributions and fold them in rank order, which is what MPI defines.
"""

from __future__ import annotations

import operator

import numpy as np

from meshcomm.mpi import exceptions as err


def _maxloc(x, y):
    (u, i), (v, j) = x, y
    if u > v:
        return x
    if v > u:
        return y
    return (u, min(i, j))


def _minloc(x, y):
    (u, i), (v, j) = x, y
    if u < v:
        return x
    if v < u:
        return y
    return (u, min(i, j))


def _pairs(choose_first):
    def reduce(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise on (value, index) records: keep x where choose_first, the lower index on ties."""
        first = choose_first(x["value"], y["value"])
        tie = x["value"] == y["value"]
        out = np.where(first, x, y)
        out["index"] = np.where(tie, np.minimum(x["index"], y["index"]), out["index"])
        return out

    return reduce


class Op:
    """An MPI reduction; calling it as op(x, y) combines two objects the way reduce() does."""

    def __init__(self, name: str = "OP_NULL", pyfunc=None, arrayfunc=None, native: str | None = None,
                 commute: bool = True) -> None:
        self.name = name
        self._pyfunc = pyfunc
        self._arrayfunc = arrayfunc
        self.native = native  # meshcomm ReduceOp name when the collectives reduce with it themselves
        self.commute = commute

    @classmethod
    def Create(cls, function, commute: bool = False) -> "Op":
        """A user op: function(invec, inoutvec, datatype) stores invec (op) inoutvec into inoutvec."""
        if not callable(function):
            raise TypeError(f"function must be callable, got {type(function).__name__}")

        def on_arrays(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            out = y.copy()
            function(x, out, None)
            return out

        return cls("USER", lambda x, y: function(x, y, None), on_arrays, None, bool(commute))

    def __call__(self, x, y):
        if self._pyfunc is None:
            raise err.Exception(err.ERR_OP, "OP_NULL cannot reduce")
        return self._pyfunc(x, y)

    def combine_arrays(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x (op) y for two buffers, x from the lower rank."""
        if self._arrayfunc is None:
            raise err.Exception(err.ERR_OP, f"{self.name} cannot reduce buffers")
        return self._arrayfunc(x, y)

    def Is_commutative(self) -> bool:
        return self.commute

    is_commutative = property(Is_commutative)
    is_predefined = property(lambda self: self.name not in ("USER", "OP_NULL"))

    def Free(self) -> None:
        if self.is_predefined:
            raise err.Exception(err.ERR_OP, f"cannot free the predefined op {self.name}")
        self.name, self._pyfunc, self._arrayfunc, self.native = "OP_NULL", None, None, None

    def Reduce_local(self, inbuf, inoutbuf) -> None:
        """inoutbuf = inbuf (op) inoutbuf, elementwise, on this process alone."""
        from meshcomm.mpi.messages import read_spec

        source = read_spec(inbuf, "inbuf")
        target = read_spec(inoutbuf, "inoutbuf", writable=True)
        if source.datatype != target.datatype:
            raise ValueError(f"inbuf and inoutbuf must have one datatype, got {source.datatype.name} "
                             f"and {target.datatype.name}")
        if source.array.size != target.array.size:
            raise ValueError(f"inbuf and inoutbuf must hold as many elements, got {source.array.size} and "
                             f"{target.array.size}")
        target.array[...] = self.combine_arrays(source.array.astype(target.array.dtype, copy=False), target.array)

    def __eq__(self, other) -> bool:
        return isinstance(other, Op) and (self is other or (self.name == other.name != "USER"))

    def __hash__(self) -> int:
        return hash(self.name)

    def __bool__(self) -> bool:
        return self.name != "OP_NULL"

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Op {self.name}>"


def _logical(fn):
    return lambda x, y: fn(x.astype(bool), y.astype(bool)).astype(y.dtype)


OP_NULL = Op()
MAX = Op("MAX", lambda x, y: y if y > x else x, np.maximum, "max")
MIN = Op("MIN", lambda x, y: y if y < x else x, np.minimum, "min")
SUM = Op("SUM", operator.add, np.add, "sum")
PROD = Op("PROD", operator.mul, np.multiply, "product")
LAND = Op("LAND", lambda x, y: bool(x and y), _logical(np.logical_and))
LOR = Op("LOR", lambda x, y: bool(x or y), _logical(np.logical_or))
LXOR = Op("LXOR", lambda x, y: bool(x) != bool(y), _logical(np.logical_xor))
BAND = Op("BAND", operator.and_, np.bitwise_and, "band")
BOR = Op("BOR", operator.or_, np.bitwise_or, "bor")
BXOR = Op("BXOR", operator.xor, np.bitwise_xor, "bxor")
MAXLOC = Op("MAXLOC", _maxloc, _pairs(np.greater))
MINLOC = Op("MINLOC", _minloc, _pairs(np.less))
REPLACE = Op("REPLACE", lambda x, y: y, lambda x, y: y.copy())
NO_OP = Op("NO_OP", lambda x, y: x, lambda x, y: x.copy())


def resolve(op) -> Op:
    if not isinstance(op, Op):
        raise TypeError(f"op must be an MPI.Op such as MPI.SUM, got {op!r}")
    if op.name == "OP_NULL":
        raise err.Exception(err.ERR_OP, "OP_NULL cannot reduce")
    return op

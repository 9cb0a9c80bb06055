"""Reduction operations: one Op applies to pickled objects (lowercase calls) and to numpy buffers.

Ops that meshcomm's collectives reduce natively (sum, product, min, max and
the bitwise ones on integers) run in the collective itself; the others
(logical ops, MAXLOC/MINLOC, REPLACE, NO_OP, user functions) gather the
contributions and fold them in rank order, which is what MPI defines.
An Op is a handle (handles.py): MPI.Op(op) names the same operation.
"""

from __future__ import annotations

import operator

import numpy as np

from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import Handle, Referent

MAX_USER_OPS = 32  # live user-defined ops at once, as mpi4py allows


def _pick_loc(better):
    """MAXLOC/MINLOC on (value, index) pairs: the better value's pair; on a tie, the pair with the lower index."""

    def reduce(x, y):
        (u, i), (v, j) = x, y
        if better(u, v):
            return x
        if better(v, u):
            return y
        return y if j < i else x

    return reduce


def _pairs(choose_first):
    def reduce(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise on (value, index) records: keep x where choose_first, the lower index on ties."""
        first = choose_first(x["value"], y["value"])
        tie = x["value"] == y["value"]
        out = np.where(first, x, y)
        out["index"] = np.where(tie, np.minimum(x["index"], y["index"]), out["index"])
        return out

    return reduce


class _Operation(Referent):
    def __init__(self, pyfunc, arrayfunc, native: str | None, commute: bool, function=None,
                 number: int | None = None, name: str = "") -> None:
        super().__init__(number, name)
        self.pyfunc = pyfunc
        self.arrayfunc = arrayfunc  # (x, y, datatype or None) -> x (op) y
        self.native = native  # meshcomm ReduceOp name when the collectives reduce with it themselves
        self.commute = commute
        self.function = function  # a user op's function(invec, inoutvec, datatype)


class Op(Handle):
    """An MPI reduction; calling it as op(x, y) combines two objects the way reduce() does."""

    _null_name = "OP_NULL"
    _created = False  # made by Create: only that object pickles (it holds the function)

    @property
    def name(self) -> str:
        ref = self._ref
        return "OP_NULL" if ref is None else ref.name or "USER"

    @property
    def native(self) -> str | None:
        return None if self._ref is None else self._ref.native

    @classmethod
    def Create(cls, function, commute: bool = False) -> "Op":
        """A user op: function(invec, inoutvec, datatype) stores invec (op) inoutvec into inoutvec."""
        if not callable(function):
            raise TypeError(f"function must be callable, got {type(function).__name__}")
        live = sum(1 for ref in Op._live.values() if not ref.predefined)
        if live >= MAX_USER_OPS:
            raise RuntimeError(f"cannot create more than {MAX_USER_OPS} user-defined ops; free some first")

        def on_objects(x, y):
            return function(x, y, None)

        def on_arrays(x: np.ndarray, y: np.ndarray, datatype) -> np.ndarray:
            out = y.copy()
            function(x, out, datatype)
            return out

        op = cls._naming(_Operation(on_objects, on_arrays, None, bool(commute), function))
        op._created = True
        return op

    def __call__(self, x, y):
        if self._ref is None:
            raise ValueError("OP_NULL cannot reduce")
        return self._ref.pyfunc(x, y)

    def combine_arrays(self, x: np.ndarray, y: np.ndarray, datatype=None) -> np.ndarray:
        """x (op) y for two buffers, x from the lower rank; a user function is told the datatype."""
        if self._ref is None:
            raise err.Exception(err.ERR_OP, "OP_NULL cannot reduce buffers")
        if self._ref.function is not None and datatype is None:
            from meshcomm.mpi.datatypes import from_dtype

            datatype = from_dtype(y.dtype)
        return self._ref.arrayfunc(x, y, datatype)

    def Is_commutative(self) -> bool:
        if self._ref is None:
            raise err.Exception(err.ERR_OP, "OP_NULL has no commutativity")
        return self._ref.commute

    is_commutative = property(Is_commutative)

    @property
    def is_predefined(self) -> bool:
        return self._ref is None or self._ref.predefined

    def Free(self) -> None:
        if self._ref is None:
            raise err.Exception(err.ERR_OP, "this is OP_NULL (or a freed op)")
        if self._ref.predefined:
            raise err.Exception(err.ERR_OP, f"cannot free the predefined op {self._ref.name}")
        self._forget()

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
        target.array[...] = self.combine_arrays(source.array.astype(target.array.dtype, copy=False), target.array,
                                                target.datatype)

    def _rebuild_args(self) -> tuple:
        if not self._created:
            raise ValueError("only the Op that Op.Create returned can be pickled (it holds the function)")
        return self._ref.function, self._ref.commute

    @classmethod
    def _rebuild(cls, function, commute: bool) -> "Op":
        return cls.Create(function, commute)


def _logical(fn):
    return lambda x, y, _=None: fn(x.astype(bool), y.astype(bool)).astype(y.dtype)


def _on_arrays(fn):
    return lambda x, y, _=None: fn(x, y)


def _predefined(number: int, name: str, pyfunc, arrayfunc, native: str | None = None,
                commute: bool = True) -> Op:
    return Op._naming(_Operation(pyfunc, arrayfunc, native, commute, number=number, name=name), constant=True)


OP_NULL = Op._naming(None, constant=True)
MAX = _predefined(1, "MAX", lambda x, y: y if y > x else x, _on_arrays(np.maximum), "max")
MIN = _predefined(2, "MIN", lambda x, y: y if y < x else x, _on_arrays(np.minimum), "min")
SUM = _predefined(3, "SUM", operator.add, _on_arrays(np.add), "sum")
PROD = _predefined(4, "PROD", operator.mul, _on_arrays(np.multiply), "product")
LAND = _predefined(5, "LAND", lambda x, y: bool(x and y), _logical(np.logical_and))
BAND = _predefined(6, "BAND", operator.and_, _on_arrays(np.bitwise_and), "band")
LOR = _predefined(7, "LOR", lambda x, y: bool(x or y), _logical(np.logical_or))
BOR = _predefined(8, "BOR", operator.or_, _on_arrays(np.bitwise_or), "bor")
LXOR = _predefined(9, "LXOR", lambda x, y: bool(x) != bool(y), _logical(np.logical_xor))
BXOR = _predefined(10, "BXOR", operator.xor, _on_arrays(np.bitwise_xor), "bxor")
MAXLOC = _predefined(11, "MAXLOC", _pick_loc(operator.gt), _on_arrays(_pairs(np.greater)))
MINLOC = _predefined(12, "MINLOC", _pick_loc(operator.lt), _on_arrays(_pairs(np.less)))
REPLACE = _predefined(13, "REPLACE", lambda x, y: y, lambda x, y, _=None: y.copy(), commute=False)
NO_OP = _predefined(14, "NO_OP", lambda x, y: x, lambda x, y, _=None: x.copy(), commute=False)


def resolve(op) -> Op:
    if not isinstance(op, Op):
        raise TypeError(f"op must be an MPI.Op such as MPI.SUM, got {op!r}")
    if op._ref is None:
        raise err.Exception(err.ERR_OP, "OP_NULL cannot reduce")
    return op

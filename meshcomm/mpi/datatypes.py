"""MPI datatypes: the predefined ones (each a numpy dtype with MPI's name and type code) and their handles.

A Datatype is a handle to a type object (_Type). `Datatype(t)` is a second
handle to the same object and compares equal to `t`; `Free` empties only
the handle it is called on. Derived types (derived.py) are _Type objects
too, with a combiner, the arguments they were made with, and their bounds.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import NamesState
from meshcomm.mpi.constants import (
    COMBINER_DUP, COMBINER_F90_COMPLEX, COMBINER_F90_INTEGER, COMBINER_F90_REAL, COMBINER_NAMED,
)


class _Type:
    """One MPI type object: its bounds in bytes, what it was made from, and how its entries sit in memory."""

    def __init__(self, *, name: str = "", dtype: np.dtype | None = None, code: str | None = None,
                 size: int = 0, lb: int = 0, ub: int = 0, true_lb: int = 0, true_ub: int = 0,
                 align: int = 1, sticky: bool = False, combiner: int = COMBINER_NAMED,
                 base: "Datatype | None" = None, params: dict | None = None, leaf: "_Type | None" = None,
                 key: str = "") -> None:
        self.name = name
        self.dtype = dtype  # a predefined type's numpy dtype; for derived ones, the dtype every entry has, if one
        self.code = code  # what tocode() answers; None where no numpy code describes the type
        self.size, self.lb, self.ub, self.true_lb, self.true_ub = size, lb, ub, true_lb, true_ub
        self.align = align  # the widest alignment of its entries: a struct's extent is padded up to it
        self.sticky = sticky  # bounds set explicitly (Create_resized), so no padding is added
        self.combiner = combiner
        self.base = base  # the type it was made from (None for named and struct types)
        self.params = params or {}  # the constructor's arguments, as decode() gives them
        self.leaf = leaf  # the predefined type all entries share, or None when they differ
        self.key = key  # a predefined type's name in PREDEFINED, for pickling
        self.blocks: list = []  # a derived type's copies of older types (derived.Block), in type-map order
        self.runs: np.ndarray | None = None  # its type map as (byte offset, length) rows, built on first use


_NULL = _Type(name="MPI_DATATYPE_NULL")


class Datatype(NamesState):
    """A handle to an MPI datatype; buffers are read and written through its layout."""

    _names = "_t"
    _null_state = _NULL

    def _build(self, datatype: "Datatype | None" = None) -> None:
        if datatype is None:
            self._t = _NULL
        elif isinstance(datatype, Datatype):
            self._t = datatype._t
        else:
            raise TypeError(f"Datatype() takes a Datatype to share, got {type(datatype).__name__}")

    @classmethod
    def _of(cls, t: _Type) -> "Datatype":
        handle = cls()
        handle._t = t
        return handle

    def _checked(self) -> _Type:
        if self._t is _NULL:
            raise err.Exception(err.ERR_TYPE, "this is DATATYPE_NULL (or a freed datatype)")
        return self._t

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype of every entry (None for DATATYPE_NULL and for types mixing several)."""
        return self._t.dtype

    # ----- sizes and bounds

    def Get_size(self) -> int:
        return self._checked().size

    def Get_extent(self) -> tuple[int, int]:
        t = self._checked()
        return t.lb, t.ub - t.lb

    def Get_true_extent(self) -> tuple[int, int]:
        t = self._checked()
        return t.true_lb, t.true_ub - t.true_lb

    size = property(Get_size)
    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: self.Get_extent()[0])
    ub = property(lambda self: self._checked().ub)
    true_extent = property(lambda self: self.Get_true_extent()[1])
    true_lb = property(lambda self: self.Get_true_extent()[0])
    true_ub = property(lambda self: self._checked().true_ub)

    # ----- names and codes

    def Get_name(self) -> str:
        return self._t.name

    def Set_name(self, name: str) -> None:
        self._checked().name = str(name)

    name = property(Get_name, Set_name)

    def tocode(self) -> str:
        """The numpy type code of this type ('i', 'f8', ...); ValueError where none describes it."""
        code = self._t.code
        if code is None:
            raise ValueError(f"no type code describes {self.Get_name() or 'this derived datatype'}")
        return code

    @staticmethod
    def fromcode(code: str) -> "Datatype":
        """The predefined datatype of a numpy type code or type string ('i', 'd', 'i4', 'f8', 'b1', ...)."""
        name = _BY_CODE.get(code) if isinstance(code, str) else None
        if name is None:
            raise ValueError(f"cannot map code {code!r} to an MPI datatype")
        return PREDEFINED[name]

    @property
    def typechar(self) -> str:
        t = self._t
        if t.code is None:
            return "" if t is _NULL else "V"
        return "c" if t.code == "c" else np.dtype(t.code).char

    @property
    def typestr(self) -> str:
        t = self._t
        if t is _NULL:
            return ""
        if t.code is None:
            return f"V{t.ub - t.lb}"
        return "U1" if t.code == "U" else np.dtype(t.code).str[1:]

    # ----- kind

    @property
    def is_named(self) -> bool:
        return self._t.combiner == COMBINER_NAMED

    @property
    def is_predefined(self) -> bool:
        return self._t.combiner in (COMBINER_NAMED, COMBINER_F90_INTEGER, COMBINER_F90_REAL, COMBINER_F90_COMPLEX)

    # ----- life cycle

    def Commit(self) -> "Datatype":
        self._checked()
        return self

    def Free(self) -> None:
        """Empty this handle (it compares equal to DATATYPE_NULL afterwards); predefined types cannot be freed."""
        t = self._checked()
        if t.combiner == COMBINER_NAMED:
            raise err.Exception(err.ERR_TYPE, f"cannot free the predefined datatype {t.name}")
        self._t = _NULL

    # ----- identity

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Datatype {self._t.name or 'derived'}>"

    def __reduce__(self):
        t = self._t
        if t.combiner == COMBINER_NAMED:
            # The predefined objects themselves unpickle as themselves; other handles as new handles.
            key = t.key or "DATATYPE_NULL"
            return (_named, (key, self is _named(key), type(self)))
        from meshcomm.mpi import derived

        return derived.rebuild_args(self)


def _named(key: str, same: bool = True, cls: type = None) -> Datatype:
    """A predefined datatype itself, or (for a copy of its handle) a new object of `cls` naming it."""
    found = DATATYPE_NULL if key == "DATATYPE_NULL" else PREDEFINED[key]
    return found if same else (cls or Datatype)(found)


def _basic(key: str, name: str, dtype, code: str | None) -> Datatype:
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    t = _Type(name=name, dtype=dtype, code=code, size=size, ub=size, true_ub=size, align=dtype.alignment, key=key)
    t.leaf = t
    return Datatype._of(t)


def _pair(key: str, name: str, value: str) -> Datatype:
    """The MINLOC/MAXLOC (value, int index) types: an aligned C struct, so 12 bytes of data in 16 for DOUBLE_INT."""
    dtype = np.dtype([("value", value), ("index", "i4")], align=True)
    t = _Type(name=name, dtype=dtype, code=None, size=np.dtype(value).itemsize + 4, ub=dtype.itemsize,
              true_ub=dtype.fields["index"][1] + 4, align=dtype.alignment, key=key)
    return Datatype._of(t)


_TABLE = [
    # key, MPI name, numpy dtype, type code (tocode)
    ("PACKED", "MPI_PACKED", "u1", "B"), ("BYTE", "MPI_BYTE", "u1", "B"), ("AINT", "MPI_AINT", "i8", "p"),
    ("OFFSET", "MPI_OFFSET", "i8", "p"), ("COUNT", "MPI_COUNT", "i8", "p"),
    ("CHAR", "MPI_CHAR", "S1", "c"), ("WCHAR", "MPI_WCHAR", "U1", "U"), ("SIGNED_CHAR", "MPI_SIGNED_CHAR", "i1", "b"),
    ("SHORT", "MPI_SHORT", "h", "h"), ("INT", "MPI_INT", "i", "i"), ("LONG", "MPI_LONG", "l", "l"),
    ("LONG_LONG", "MPI_LONG_LONG_INT", "q", "q"), ("UNSIGNED_CHAR", "MPI_UNSIGNED_CHAR", "B", "B"),
    ("UNSIGNED_SHORT", "MPI_UNSIGNED_SHORT", "H", "H"), ("UNSIGNED", "MPI_UNSIGNED", "I", "I"),
    ("UNSIGNED_LONG", "MPI_UNSIGNED_LONG", "L", "L"), ("UNSIGNED_LONG_LONG", "MPI_UNSIGNED_LONG_LONG", "Q", "Q"),
    ("FLOAT", "MPI_FLOAT", "f", "f"), ("DOUBLE", "MPI_DOUBLE", "d", "d"), ("LONG_DOUBLE", "MPI_LONG_DOUBLE", "g", "g"),
    ("FLOAT16_T", "MPIX_C_FLOAT16", "e", "e"),
    ("C_BOOL", "MPI_C_BOOL", "?", "b1"), ("INT8_T", "MPI_INT8_T", "i1", "i1"), ("INT16_T", "MPI_INT16_T", "i2", "i2"),
    ("INT32_T", "MPI_INT32_T", "i4", "i4"), ("INT64_T", "MPI_INT64_T", "i8", "i8"),
    ("UINT8_T", "MPI_UINT8_T", "u1", "u1"), ("UINT16_T", "MPI_UINT16_T", "u2", "u2"),
    ("UINT32_T", "MPI_UINT32_T", "u4", "u4"), ("UINT64_T", "MPI_UINT64_T", "u8", "u8"),
    ("C_COMPLEX", "MPI_C_COMPLEX", "F", "F"), ("C_DOUBLE_COMPLEX", "MPI_C_DOUBLE_COMPLEX", "D", "D"),
    ("C_LONG_DOUBLE_COMPLEX", "MPI_C_LONG_DOUBLE_COMPLEX", "G", "G"),
    ("CXX_BOOL", "MPI_CXX_BOOL", "?", "?"), ("CXX_FLOAT_COMPLEX", "MPI_CXX_FLOAT_COMPLEX", "F", "F"),
    ("CXX_DOUBLE_COMPLEX", "MPI_CXX_DOUBLE_COMPLEX", "D", "D"),
    ("CXX_LONG_DOUBLE_COMPLEX", "MPI_CXX_LONG_DOUBLE_COMPLEX", "G", "G"),
    ("CHARACTER", "MPI_CHARACTER", "S1", "c"), ("LOGICAL", "MPI_LOGICAL", "i4", "i"),
    ("INTEGER", "MPI_INTEGER", "i4", "i"), ("REAL", "MPI_REAL", "f4", "f"),
    ("DOUBLE_PRECISION", "MPI_DOUBLE_PRECISION", "f8", "d"), ("COMPLEX", "MPI_COMPLEX", "c8", "F"),
    ("DOUBLE_COMPLEX", "MPI_DOUBLE_COMPLEX", "c16", "D"),
    ("INTEGER1", "MPI_INTEGER1", "i1", "i1"), ("INTEGER2", "MPI_INTEGER2", "i2", "i2"),
    ("INTEGER4", "MPI_INTEGER4", "i4", "i4"), ("INTEGER8", "MPI_INTEGER8", "i8", "i8"),
    ("REAL4", "MPI_REAL4", "f4", "f4"), ("REAL8", "MPI_REAL8", "f8", "f8"), ("REAL16", "MPI_REAL16", "g", "f16"),
    ("COMPLEX8", "MPI_COMPLEX8", "c8", "c8"), ("COMPLEX16", "MPI_COMPLEX16", "c16", "c16"),
    ("COMPLEX32", "MPI_COMPLEX32", "G", "c32"),
]
_PAIRS = [
    ("SHORT_INT", "MPI_SHORT_INT", "h"), ("INT_INT", "MPI_2INT", "i"), ("LONG_INT", "MPI_LONG_INT", "l"),
    ("FLOAT_INT", "MPI_FLOAT_INT", "f"), ("DOUBLE_INT", "MPI_DOUBLE_INT", "d"),
    ("LONG_DOUBLE_INT", "MPI_LONG_DOUBLE_INT", "g"),
]
# Other names of the same type objects, as in mpi.h.
_ALIASES = {
    "UNSIGNED_INT": "UNSIGNED", "SIGNED_SHORT": "SHORT", "SIGNED_INT": "INT", "SIGNED_LONG": "LONG",
    "SIGNED_LONG_LONG": "LONG_LONG", "UNSIGNED_LONG_LONG_INT": "UNSIGNED_LONG_LONG", "LONG_LONG_INT": "LONG_LONG",
    "SINT8_T": "INT8_T", "SINT16_T": "INT16_T", "SINT32_T": "INT32_T", "SINT64_T": "INT64_T", "BOOL": "C_BOOL",
    "FLOAT32_T": "FLOAT", "FLOAT64_T": "DOUBLE", "C_FLOAT_COMPLEX": "C_COMPLEX", "TWOINT": "INT_INT",
    "F_BOOL": "LOGICAL", "F_INT": "INTEGER", "F_FLOAT": "REAL", "F_DOUBLE": "DOUBLE_PRECISION",
    "F_COMPLEX": "COMPLEX", "F_FLOAT_COMPLEX": "COMPLEX", "F_DOUBLE_COMPLEX": "DOUBLE_COMPLEX",
}
# Named in MPI but with no numpy type to hold them here: null handles, as an MPI built without them has.
_ABSENT = ["BFLOAT16_T", "LOGICAL1", "LOGICAL2", "LOGICAL4", "LOGICAL8", "LOGICAL16", "INTEGER16", "REAL2", "COMPLEX4"]

DATATYPE_NULL = Datatype()
PREDEFINED: dict[str, Datatype] = {key: _basic(key, name, dtype, code) for key, name, dtype, code in _TABLE}
PREDEFINED.update({key: _pair(key, name, value) for key, name, value in _PAIRS})
PREDEFINED.update({alias: PREDEFINED[key] for alias, key in _ALIASES.items()})
PREDEFINED.update({key: Datatype() for key in _ABSENT})

# What a numpy type code or type string names (fromcode, and buffers that carry no datatype).
_BY_CODE = {
    "?": "C_BOOL", "c": "CHAR", "S": "CHAR", "U": "WCHAR", "b": "SIGNED_CHAR", "h": "SHORT", "i": "INT",
    "l": "LONG", "q": "LONG_LONG", "p": "AINT", "B": "UNSIGNED_CHAR", "H": "UNSIGNED_SHORT", "I": "UNSIGNED",
    "L": "UNSIGNED_LONG", "Q": "UNSIGNED_LONG_LONG", "P": "UNSIGNED_LONG", "e": "FLOAT16_T", "f": "FLOAT",
    "d": "DOUBLE", "g": "LONG_DOUBLE", "F": "C_COMPLEX", "D": "C_DOUBLE_COMPLEX", "G": "C_LONG_DOUBLE_COMPLEX",
    "b1": "C_BOOL", "i1": "INT8_T", "i2": "INT16_T", "i4": "INT32_T", "i8": "INT64_T", "u1": "UINT8_T",
    "u2": "UINT16_T", "u4": "UINT32_T", "u8": "UINT64_T", "f2": "FLOAT16_T", "f4": "FLOAT", "f8": "DOUBLE",
    "c8": "C_COMPLEX", "c16": "C_DOUBLE_COMPLEX",
}
if np.dtype("g").itemsize == 16:
    _BY_CODE.update({"f16": "LONG_DOUBLE", "c32": "C_LONG_DOUBLE_COMPLEX"})


def typealign(datatype: Datatype) -> int | None:
    """The alignment of a predefined type (or a duplicate of one); None for other derived types."""
    t = datatype._t
    while t.combiner == COMBINER_DUP:
        t = t.base._t
    named = (COMBINER_NAMED, COMBINER_F90_INTEGER, COMBINER_F90_REAL, COMBINER_F90_COMPLEX)
    return t.align if t is not _NULL and t.combiner in named else None


def typecode(datatype: Datatype) -> str | None:
    return datatype._t.code


def from_typechar(char: str) -> Datatype:
    """The datatype a type character ('i', 'd', 'B', ...) names; KeyError for an unknown one, as in mpi4py."""
    name = _BY_CODE.get(char)
    if name is None:
        raise KeyError(f"unknown datatype character {char!r}")
    return PREDEFINED[name]


def from_dtype(dtype: np.dtype) -> Datatype:
    """The predefined datatype of a numpy dtype (its type character decides)."""
    name = _BY_CODE.get(dtype.char)
    if name is not None and PREDEFINED[name].dtype == dtype:
        return PREDEFINED[name]
    raise err.Exception(err.ERR_TYPE, f"numpy dtype {dtype} has no MPI datatype")


def resolve(datatype) -> Datatype:
    """A Datatype from a Datatype, a type character or a numpy dtype."""
    if isinstance(datatype, Datatype):
        if not datatype:
            raise err.Exception(err.ERR_TYPE, "DATATYPE_NULL cannot describe a buffer")
        return datatype
    if isinstance(datatype, str):
        return from_typechar(datatype)
    try:
        return from_dtype(np.dtype(datatype))
    except TypeError:
        raise TypeError(f"datatype must be an MPI.Datatype, a type character or a numpy dtype, got {datatype!r}") from None

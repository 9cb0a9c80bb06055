"""The standard MPI datatypes, each a numpy dtype with MPI's name and type character."""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import exceptions as err


class Datatype:
    """A named element type; buffers are read and written as its numpy dtype."""

    def __init__(self, name: str = "DATATYPE_NULL", dtype: np.dtype | str | None = None, typechar: str = "") -> None:
        self.name = name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.typechar = typechar

    def _checked(self) -> np.dtype:
        if self.dtype is None:
            raise err.Exception(err.ERR_TYPE, f"datatype {self.name} has no element type")
        return self.dtype

    def Get_size(self) -> int:
        return self._checked().itemsize

    def Get_extent(self) -> tuple[int, int]:
        return 0, self._checked().itemsize

    def Get_true_extent(self) -> tuple[int, int]:
        return self.Get_extent()

    def Get_name(self) -> str:
        return f"MPI_{self.name}"

    def Dup(self) -> "Datatype":
        return Datatype(self.name, self.dtype, self.typechar)

    def Commit(self) -> "Datatype":
        return self

    def Free(self) -> None:
        """Predefined datatypes cannot be freed; a duplicate becomes DATATYPE_NULL."""
        if self in _PREDEFINED_IDS:
            raise err.Exception(err.ERR_TYPE, f"cannot free the predefined datatype {self.name}")
        self.name, self.dtype, self.typechar = "DATATYPE_NULL", None, ""

    size = property(Get_size)
    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: 0)
    ub = property(lambda self: self.Get_extent()[1])

    @property
    def is_predefined(self) -> bool:
        return True

    def __eq__(self, other) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __bool__(self) -> bool:
        return self.dtype is not None

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Datatype {self.name}>"


def _pair(value: str) -> np.dtype:
    """The struct of MAXLOC/MINLOC pair types: a value and an int index."""
    return np.dtype([("value", value), ("index", "i4")])


_TABLE = [
    # name, numpy dtype, type character
    ("PACKED", "u1", "B"), ("BYTE", "u1", "B"), ("AINT", "i8", "q"), ("OFFSET", "i8", "q"), ("COUNT", "i8", "q"),
    ("CHAR", "S1", "c"), ("WCHAR", "u4", "U"), ("SIGNED_CHAR", "i1", "b"),
    ("SHORT", "h", "h"), ("INT", "i", "i"), ("LONG", "l", "l"), ("LONG_LONG", "q", "q"),
    ("UNSIGNED_CHAR", "B", "B"), ("UNSIGNED_SHORT", "H", "H"), ("UNSIGNED", "I", "I"),
    ("UNSIGNED_LONG", "L", "L"), ("UNSIGNED_LONG_LONG", "Q", "Q"),
    ("FLOAT", "f", "f"), ("DOUBLE", "d", "d"), ("LONG_DOUBLE", "g", "g"),
    ("C_BOOL", "?", "?"), ("INT8_T", "i1", "b"), ("INT16_T", "i2", "h"), ("INT32_T", "i4", "i"),
    ("INT64_T", "i8", "q"), ("UINT8_T", "u1", "B"), ("UINT16_T", "u2", "H"), ("UINT32_T", "u4", "I"),
    ("UINT64_T", "u8", "Q"), ("C_COMPLEX", "F", "F"), ("C_FLOAT_COMPLEX", "F", "F"),
    ("C_DOUBLE_COMPLEX", "D", "D"), ("C_LONG_DOUBLE_COMPLEX", "G", "G"),
    ("CXX_BOOL", "?", "?"), ("CXX_FLOAT_COMPLEX", "F", "F"), ("CXX_DOUBLE_COMPLEX", "D", "D"),
    ("CXX_LONG_DOUBLE_COMPLEX", "G", "G"),
    ("SHORT_INT", _pair("h"), ""), ("INT_INT", _pair("i"), ""), ("TWOINT", _pair("i"), ""),
    ("LONG_INT", _pair("l"), ""), ("FLOAT_INT", _pair("f"), ""), ("DOUBLE_INT", _pair("d"), ""),
    ("LONG_DOUBLE_INT", _pair("g"), ""),
    ("CHARACTER", "S1", "c"), ("LOGICAL", "i4", ""), ("INTEGER", "i4", "i"), ("REAL", "f4", "f"),
    ("DOUBLE_PRECISION", "f8", "d"), ("COMPLEX", "c8", "F"), ("DOUBLE_COMPLEX", "c16", "D"),
    ("REAL4", "f4", "f"), ("REAL8", "f8", "d"), ("INTEGER1", "i1", "b"), ("INTEGER2", "i2", "h"),
    ("INTEGER4", "i4", "i"), ("INTEGER8", "i8", "q"), ("COMPLEX8", "c8", "F"), ("COMPLEX16", "c16", "D"),
]

DATATYPE_NULL = Datatype()
PREDEFINED: dict[str, Datatype] = {name: Datatype(name, dtype, char) for name, dtype, char in _TABLE}
PREDEFINED["UNSIGNED_INT"] = PREDEFINED["UNSIGNED"]
PREDEFINED["SINT8_T"] = PREDEFINED["INT8_T"]
_PREDEFINED_IDS = set(PREDEFINED.values())

# What a type character or numpy dtype means when a message names no datatype.
_BY_CHAR = {
    "c": "CHAR", "b": "SIGNED_CHAR", "B": "UNSIGNED_CHAR", "h": "SHORT", "H": "UNSIGNED_SHORT", "i": "INT",
    "I": "UNSIGNED", "l": "LONG", "L": "UNSIGNED_LONG", "q": "LONG_LONG", "Q": "UNSIGNED_LONG_LONG",
    "f": "FLOAT", "d": "DOUBLE", "g": "LONG_DOUBLE", "?": "C_BOOL", "F": "C_FLOAT_COMPLEX",
    "D": "C_DOUBLE_COMPLEX", "G": "C_LONG_DOUBLE_COMPLEX", "e": None,
}


def from_typechar(char: str) -> Datatype:
    """The datatype a type character ('i', 'd', 'B', ...) names; ERR_TYPE for an unknown one."""
    name = _BY_CHAR.get(char)
    if name is None:
        try:
            return from_dtype(np.dtype(char))
        except TypeError:
            raise err.Exception(err.ERR_TYPE, f"unknown datatype character {char!r}") from None
    return PREDEFINED[name]


def from_dtype(dtype: np.dtype) -> Datatype:
    """The datatype of a numpy dtype (half and other non-MPI types get one named after numpy's)."""
    char = dtype.char
    name = _BY_CHAR.get(char)
    if name is not None and PREDEFINED[name].dtype == dtype:
        return PREDEFINED[name]
    if dtype.kind in "biufc":
        return Datatype(dtype.name.upper(), dtype, char)
    raise err.Exception(err.ERR_TYPE, f"numpy dtype {dtype} has no MPI datatype")


def resolve(datatype) -> Datatype:
    """A Datatype from a Datatype, a type character or a numpy dtype."""
    if isinstance(datatype, Datatype):
        if datatype.dtype is None:
            raise err.Exception(err.ERR_TYPE, "DATATYPE_NULL cannot describe a buffer")
        return datatype
    if isinstance(datatype, str):
        return from_typechar(datatype)
    try:
        return from_dtype(np.dtype(datatype))
    except TypeError:
        raise TypeError(f"datatype must be an MPI.Datatype, a type character or a numpy dtype, got {datatype!r}") from None

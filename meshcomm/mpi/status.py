"""MPI.Status: who sent a received message, with which tag, and how big it was."""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err

# The fields live in one int64 array, so tomemory() can hand out a writable view of them, as MPI's C struct allows.
_SOURCE, _TAG, _ERROR, _NBYTES, _CANCELLED = range(5)
# Where py2f's list keeps each field, as MPI's Fortran status array names them.
F_SOURCE, F_TAG, F_ERROR = _SOURCE, _TAG, _ERROR
F_STATUS_SIZE = 5


class Status:
    def __init__(self, status: "Status | None" = None) -> None:
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"Status() takes another Status to copy, got {type(status).__name__}")
        self._fields = np.array([C.ANY_SOURCE, C.ANY_TAG, err.SUCCESS, 0, 0], dtype=np.int64)
        if status is not None:
            self._copy_from(status)

    def _copy_from(self, other: "Status") -> None:
        self._fields[:] = other._fields

    def _set(self, source: int, tag: int, nbytes: int) -> None:
        self._fields[:] = (source, tag, err.SUCCESS, nbytes, 0)

    def _field(index: int, convert=int):
        def get(self):
            return convert(self._fields[index])

        def put(self, value) -> None:
            self._fields[index] = int(value)

        return property(get, put)

    source = _field(_SOURCE)
    tag = _field(_TAG)
    error = _field(_ERROR)
    nbytes = _field(_NBYTES)
    cancelled = _field(_CANCELLED, bool)
    del _field

    def Get_source(self) -> int:
        return self.source

    def Set_source(self, source: int) -> None:
        self.source = source

    def Get_tag(self) -> int:
        return self.tag

    def Set_tag(self, tag: int) -> None:
        self.tag = tag

    def Get_error(self) -> int:
        return self.error

    def Set_error(self, error: int) -> None:
        self.error = error

    def Get_count(self, datatype=None) -> int:
        """Elements of `datatype` (bytes when None) received; UNDEFINED if they do not divide evenly."""
        from meshcomm.mpi.datatypes import PREDEFINED, resolve

        size = (PREDEFINED["BYTE"] if datatype is None else resolve(datatype)).Get_size()
        if size == 0:
            return 0
        return self.nbytes // size if self.nbytes % size == 0 else C.UNDEFINED

    Get_elements = Get_count

    def Set_elements(self, datatype, count: int) -> None:
        from meshcomm.mpi.datatypes import resolve

        self.nbytes = count * resolve(datatype).Get_size()

    def Is_cancelled(self) -> bool:
        return self.cancelled

    def Set_cancelled(self, flag: bool) -> None:
        self.cancelled = bool(flag)

    count = property(lambda self: self.Get_count(), lambda self, count: setattr(self, "nbytes", int(count)))

    def tomemory(self) -> memoryview:
        """The status fields as writable integers (source, tag, error, bytes, cancelled): writes change the status."""
        return memoryview(self._fields)

    def py2f(self) -> list[int]:
        return [int(x) for x in self._fields]

    @classmethod
    def f2py(cls, fields) -> "Status":
        status = cls()
        status._fields[:] = fields
        return status

    def __getstate__(self) -> dict:
        return {"fields": self.py2f()}

    def __setstate__(self, state: dict) -> None:
        self._fields = np.array(state["fields"], dtype=np.int64)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return bool((self._fields[:4] == other._fields[:4]).all())

    __hash__ = None

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Status source={self.source} tag={self.tag} bytes={self.nbytes}>"


def empty(status: Status | None, source: int = C.ANY_SOURCE) -> None:
    """MPI's empty status, left by null requests and sends (a receive from PROC_NULL names PROC_NULL)."""
    if status is not None:
        status._set(source, C.ANY_TAG, 0)

"""MPI.Status: who sent a received message, with which tag, and how big it was."""

from __future__ import annotations

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err


class Status:
    def __init__(self, status: "Status | None" = None) -> None:
        self.source = C.ANY_SOURCE
        self.tag = C.ANY_TAG
        self.error = err.SUCCESS
        self.nbytes = 0
        self.cancelled = False
        if status is not None:
            self._copy_from(status)

    def _copy_from(self, other: "Status") -> None:
        self.source, self.tag, self.error = other.source, other.tag, other.error
        self.nbytes, self.cancelled = other.nbytes, other.cancelled

    def _set(self, source: int, tag: int, nbytes: int) -> None:
        self.source, self.tag, self.error, self.nbytes, self.cancelled = source, tag, err.SUCCESS, nbytes, False

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

    count = property(lambda self: self.Get_count())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.source, self.tag, self.error, self.nbytes) == (other.source, other.tag, other.error, other.nbytes)

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Status source={self.source} tag={self.tag} bytes={self.nbytes}>"


def empty(status: Status | None, source: int = C.ANY_SOURCE) -> None:
    """MPI's empty status, left by null requests and sends (a receive from PROC_NULL names PROC_NULL)."""
    if status is not None:
        status._set(source, C.ANY_TAG, 0)

"""MPI.File's handle and constants: MPI I/O is outside the face, so File.Open raises NotImplementedError.

The null handle and the access-mode bits exist so that programs (and
mpi4py's tests) that check for I/O support can ask and carry on without it.
"""

from __future__ import annotations

from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import Handle

__all__ = [
    "FILE_NULL", "File", "MODE_APPEND", "MODE_CREATE", "MODE_DELETE_ON_CLOSE", "MODE_EXCL", "MODE_RDONLY",
    "MODE_RDWR", "MODE_SEQUENTIAL", "MODE_UNIQUE_OPEN", "MODE_WRONLY",
]

MODE_CREATE, MODE_RDONLY, MODE_WRONLY, MODE_RDWR = 1, 2, 4, 8
MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN, MODE_EXCL, MODE_APPEND, MODE_SEQUENTIAL = 16, 32, 64, 128, 256


class File(Handle):
    """An open file for MPI I/O; only FILE_NULL exists, since the face has no I/O."""

    _null_name = "FILE_NULL"

    @classmethod
    def Open(cls, comm, filename, amode: int = MODE_RDONLY, info=None) -> "File":
        raise NotImplementedError("MPI I/O (MPI.File) is not part of meshcomm's MPI face")

    def Close(self) -> None:
        raise err.Exception(err.ERR_FILE, "this is FILE_NULL")

    Free = Close


FILE_NULL = File._naming(None, constant=True)

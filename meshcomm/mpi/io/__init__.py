"""MPI-IO: MPI.File and its constants, and Register_datarep (file.py; view.py, pointer.py and posix.py beneath it)."""

from meshcomm.mpi.io.file import (
    DISPLACEMENT_CURRENT, FILE_NULL, MODE_APPEND, MODE_CREATE, MODE_DELETE_ON_CLOSE, MODE_EXCL, MODE_RDONLY,
    MODE_RDWR, MODE_SEQUENTIAL, MODE_UNIQUE_OPEN, MODE_WRONLY, SEEK_CUR, SEEK_END, SEEK_SET, File,
)
from meshcomm.mpi.io.view import Register_datarep

__all__ = [
    "DISPLACEMENT_CURRENT", "FILE_NULL", "File", "MODE_APPEND", "MODE_CREATE", "MODE_DELETE_ON_CLOSE", "MODE_EXCL",
    "MODE_RDONLY", "MODE_RDWR", "MODE_SEQUENTIAL", "MODE_UNIQUE_OPEN", "MODE_WRONLY", "Register_datarep",
    "SEEK_CUR", "SEEK_END", "SEEK_SET",
]

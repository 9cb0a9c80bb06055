"""The POSIX side of MPI-IO: opening, reading and writing runs of a file, record locks, errno as MPI errors."""

from __future__ import annotations

import errno
import fcntl
import os

import numpy as np

from meshcomm.mpi import exceptions as err

_ERRNO_CLASSES = {
    errno.ENOENT: err.ERR_NO_SUCH_FILE, errno.EEXIST: err.ERR_FILE_EXISTS, errno.EACCES: err.ERR_ACCESS,
    errno.EPERM: err.ERR_ACCESS, errno.EROFS: err.ERR_READ_ONLY, errno.ENOSPC: err.ERR_NO_SPACE,
    errno.EDQUOT: err.ERR_QUOTA, errno.ENAMETOOLONG: err.ERR_BAD_FILE, errno.EISDIR: err.ERR_BAD_FILE,
    errno.ENOTDIR: err.ERR_BAD_FILE,
}


def mpi_error(error: OSError, what: str) -> err.Exception:
    return err.Exception(_ERRNO_CLASSES.get(error.errno, err.ERR_IO), f"{what}: {error.strerror or error}")


def open_file(path: str, flags: int) -> tuple[int, err.Exception | None]:
    try:
        return os.open(path, flags, 0o666), None
    except OSError as error:
        return -1, mpi_error(error, f"opening {path!r}")


def write_runs(fd: int, runs: np.ndarray, data: np.ndarray) -> int:
    done = 0
    for offset, length in runs.tolist():
        piece = memoryview(data[done : done + length])
        while piece.nbytes:
            try:
                written = os.pwrite(fd, piece, offset)
            except OSError as error:
                raise mpi_error(error, "writing") from None
            piece, offset, done = piece[written:], offset + written, done + written
    return done


def read_runs(fd: int, runs: np.ndarray, target: np.ndarray) -> int:
    """Read into `target` (a 1-D array) until the runs end or the file does; the bytes read."""
    data = bytearray(int(runs[:, 1].sum()) if len(runs) else 0)
    done = 0
    for offset, length in runs.tolist():
        try:
            got = os.preadv(fd, [memoryview(data)[done : done + length]], offset)
        except OSError as error:
            raise mpi_error(error, "reading") from None
        done += got
        if got < length:
            break  # the end of the file
    whole = done // target.itemsize
    target[:whole] = np.frombuffer(data, dtype=target.dtype, count=whole)
    return done


class RangeLock:
    """A POSIX record lock over the bytes an access touches, for its duration (none when fd is None)."""

    def __init__(self, fd: int | None, runs: np.ndarray, writing: bool) -> None:
        self._fd = fd if len(runs) else None
        if self._fd is not None:
            self._start = int(runs[:, 0].min())
            self._length = int((runs[:, 0] + runs[:, 1]).max()) - self._start
            self._kind = fcntl.LOCK_EX if writing else fcntl.LOCK_SH

    def __enter__(self) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, self._kind, self._length, self._start)

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, self._length, self._start)

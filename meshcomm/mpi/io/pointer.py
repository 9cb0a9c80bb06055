"""The shared file pointer: one counter (in etypes) every rank of a file moves atomically.

It lives in an 8-byte window on rank 0 of the file's communicator, so an
independent Write_shared on any rank is a Fetch_and_op there: atomic, and
reachable across hosts as the window is.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import ops
from meshcomm.mpi.window import LOCK_EXCLUSIVE, LOCK_SHARED, Win


class SharedPointer:
    def __init__(self, comm) -> None:
        self._win = Win.Allocate(8 if comm.Get_rank() == 0 else 0, 8, comm=comm)

    def _fetch(self, value: int, op, lock: int) -> int:
        operand, old = np.array([value], dtype=np.int64), np.zeros(1, dtype=np.int64)
        self._win.Lock(0, lock)
        try:
            self._win.Fetch_and_op(operand, old, 0, 0, op)
        finally:
            self._win.Unlock(0)
        return int(old[0])

    def advance(self, etypes: int) -> int:
        """Move the pointer on by `etypes`; where it was."""
        return self._fetch(etypes, ops.SUM, LOCK_SHARED)

    def get(self) -> int:
        return self._fetch(0, ops.NO_OP, LOCK_SHARED)

    def set(self, position: int) -> None:
        self._fetch(position, ops.REPLACE, LOCK_EXCLUSIVE)

    def free(self) -> None:
        """Collective over the file's ranks."""
        self._win.Free()

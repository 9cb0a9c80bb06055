"""Memory for Allocate_shared: one file in /dev/shm that every rank of the window maps.

Rank r's part starts where rank r - 1's ends, so the whole window is one
contiguous range, as MPI's default for shared windows says. Rank 0 creates
the file and unlinks its name once every rank has mapped it, so nothing is
left in /dev/shm whatever happens later; the memory lives until the last
rank unmaps it.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from meshcomm.mpi import exceptions as err
from meshcomm.transport.shm import DIRECTORY, map_file, unlink_quietly


class SharedMemory:
    """The mapped window: every rank's part, by rank."""

    def __init__(self, mapping: mmap.mmap, sizes: list[int]) -> None:
        self._mapping = mapping
        whole = np.frombuffer(mapping, dtype=np.uint8)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.parts = [whole[starts[r] : starts[r + 1]] for r in range(len(sizes))]

    @classmethod
    def allocate(cls, comm, sizes: list[int]) -> "SharedMemory":
        """Collective over `comm` (an Intracomm whose ranks share this host)."""
        g = comm._g
        if g.hosts:
            raise err.Exception(err.ERR_RMA_SHARED, "Allocate_shared needs every rank of the communicator on "
                                                    "one host (split it with Split_type(COMM_TYPE_SHARED))")
        total = max(sum(sizes), 1)  # a file mapping cannot be empty
        path = None
        if comm.Get_rank() == 0:
            path = os.path.join(DIRECTORY, f"meshcomm-win-{os.getpid()}-{os.urandom(6).hex()}")
            mapping = map_file(path, total, True, "shared window")
        try:
            path = comm.bcast(path, root=0)
            if comm.Get_rank() != 0:
                mapping = map_file(path, total, False, "shared window")
            comm.Barrier()
        finally:
            if comm.Get_rank() == 0:
                unlink_quietly(path)
        return cls(mapping, sizes)

    def close(self) -> None:
        self.parts = []
        try:
            self._mapping.close()
        except BufferError:
            pass  # the caller still holds a view of it; the mapping goes with the process

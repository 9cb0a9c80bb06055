"""Comm.Split_type: communicators of the ranks that share a host's memory (what Win.Allocate_shared needs)."""

from __future__ import annotations

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.comm import Comm

COMM_TYPE_SHARED = 1
COMM_TYPE_HW_GUIDED = 2
COMM_TYPE_HW_UNGUIDED = 3
COMM_TYPE_RESOURCE_GUIDED = C.UNDEFINED  # MPI 4.1's; meshcomm speaks MPI 3.1, where it does not exist

_SHARED_MEMORY = "mpi_shared_memory"  # the only hardware resource meshcomm knows: one host's memory


def Split_type(self, split_type: int, key: int = 0, info=None):
    """Collective: ranks on one host form a communicator (COMM_TYPE_SHARED, or HW_GUIDED asking for
    "mpi_shared_memory"); UNDEFINED, and any other hardware level, gives COMM_NULL."""
    if isinstance(split_type, bool) or not isinstance(split_type, int):
        raise TypeError(f"split_type must be an int, got {type(split_type).__name__}")
    known = (COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, C.UNDEFINED)
    if split_type not in known:
        raise err.Exception(err.ERR_ARG, f"split_type must be COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, "
                                         f"COMM_TYPE_HW_UNGUIDED or UNDEFINED, got {split_type}")
    wanted = info.Get("mpi_hw_resource_type") if info is not None and info else None
    by_host = split_type == COMM_TYPE_SHARED or (split_type == COMM_TYPE_HW_GUIDED and wanted == _SHARED_MEMORY)
    g = self._g
    color = C.UNDEFINED
    if by_host:
        hosts = g.runtime.transport.host_of
        color = sorted(set(hosts)).index(hosts[g.runtime.rank])
    return self.Split(color, key)


setattr(Comm, "Split_type", Split_type)

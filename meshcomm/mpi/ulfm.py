"""ULFM on communicators, as mpi4py names it: Revoke, Is_revoked, Agree, Iagree, Shrink, Ishrink, Get_failed,
Ack_failed. Each is meshcomm.group.survival's call on the communicator's group (docs/failures.md).

Shrink never retires COMM_WORLD: as in MPI, the old communicator stays (revoked) and the caller frees it.
"""

from __future__ import annotations


import numpy as np

from meshcomm.group import survival
from meshcomm.group.group import Group as GroupOfRanks
from meshcomm.mpi import lane
from meshcomm.mpi.comm import Comm, Intracomm
from meshcomm.mpi.groups import Group
from meshcomm.mpi.intercomm import InterGroup, Intercomm
from meshcomm.mpi.request import Request

_INT = np.dtype(np.intc)


def _is_revoked(self) -> bool:
    return survival.is_revoked(self._g)


def _revoke(self) -> None:
    survival.revoke(self._g, f"{self.Get_name()}.Revoke()")


def _agree(self, flag: int) -> int:
    """The bitwise AND of `flag` over the live processes; every one of them gets the same value."""
    if isinstance(flag, bool) or not isinstance(flag, (int, np.integer)):
        raise TypeError(f"flag must be an int, got {type(flag).__name__}")
    return survival.agree(self._g, int(flag))


def _flag_view(flag) -> np.ndarray:
    """Iagree's flag: one writable C int in a buffer."""
    if isinstance(flag, (int, np.integer)):
        raise TypeError(f"flag must be a writable buffer holding one C int, got {type(flag).__name__}")
    view = memoryview(flag)
    if view.readonly:
        raise TypeError("flag must be a writable buffer, got a read-only one")
    if view.nbytes != _INT.itemsize:
        raise ValueError(f"flag must hold exactly one C int ({_INT.itemsize} bytes), got {view.nbytes} bytes")
    return np.frombuffer(view.cast("B"), dtype=np.uint8).view(_INT)


def _iagree(self, flag) -> Request:
    view = _flag_view(flag)
    g = self._g
    agreement = survival.agreement_of(g, int(view[0]))

    def run() -> None:
        view[0] = agreement()

    return Request(g.mailbox, lane.agreement_lane(g).start(run, "Iagree"))


def _shrink(self) -> Comm:
    """A communicator of the processes still alive, in their old order; every survivor gets the same one.

    The survivors get a runtime of their own (survival.py); this communicator stays as it was."""
    g = self._g
    if isinstance(g, InterGroup):
        return _shrink_inter(g)
    return Intracomm._of(survival.shrink(g, replace=False), f"{self.Get_name()}.shrunk")


def _shrink_inter(g: InterGroup) -> Intercomm:
    """Both sides shrink as one group, then pair up again in the survivors' runtime, each side in its old order."""
    both = GroupOfRanks(g.runtime, tuple(sorted(g.ranks + g.remote_ranks)), g.group_id, g.group_name, g.timeout)
    world = survival.shrink(both, replace=False)
    new_rank = {old: new for new, old in enumerate(r for r in both.ranks if r not in both.failed)}
    local = tuple(new_rank[r] for r in g.ranks if r in new_rank)
    remote = tuple(new_rank[r] for r in g.remote_ranks if r in new_rank)
    rt = world.runtime
    first_id = rt.unused_group_id()  # a fresh runtime: the same on every survivor
    rt.reserve_group_id(first_id + 3)
    side = 0 if min(local) < min(remote) else 1
    mine = rt.new_group(local, g.timeout, f"intercomm{first_id + 2}/local", group_id=first_id + side)
    return Intercomm._of(InterGroup(mine, remote, first_id))


def _ishrink(self) -> tuple[Intracomm, Request]:
    """Shrink, returned with a request that is already complete (the group must exist when it is returned)."""
    return _shrink(self), Request.completed()


def _get_failed(self) -> Group:
    g = self._g
    failed = survival.failed_ranks(g)
    return self.Get_group().Incl([g.group_rank(r) for r in failed])


def _ack_failed(self, num_to_ack: int | None = None) -> int:
    """Acknowledge up to `num_to_ack` (default all) of the failures known now; the number acknowledged."""
    if num_to_ack is not None and (isinstance(num_to_ack, bool) or not isinstance(num_to_ack, (int, np.integer))):
        raise TypeError(f"num_to_ack must be an int or None, got {type(num_to_ack).__name__}")
    known = len(survival.failed_ranks(self._g))
    self._acked = max(getattr(self, "_acked", 0), known if num_to_ack is None else min(int(num_to_ack), known))
    return self._acked


Comm.Is_revoked = _is_revoked
Comm.Revoke = _revoke
Comm.Agree = _agree
Comm.Iagree = _iagree
Comm.Shrink = _shrink
Comm.Ishrink = _ishrink
Comm.Get_failed = _get_failed
Comm.Ack_failed = _ack_failed

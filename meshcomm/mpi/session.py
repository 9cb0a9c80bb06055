"""MPI.Session: MPI 4's way in without COMM_WORLD: process sets, their info, and groups made from them.

A session here is a view of the job meshcomm already runs: it has two
process sets, mpi://WORLD (every rank) and mpi://SELF (this rank), and
Create_group turns one into an MPI.Group from which
Intracomm.Create_from_group (or Comm.Create_group) makes a communicator.
"""

from __future__ import annotations

from meshcomm.mpi import errhandler as handlers
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.environment import AttachedBuffers
from meshcomm.mpi.handles import Handle, Referent
from meshcomm.mpi.info import INFO_NULL, Info

PSETS = ("mpi://WORLD", "mpi://SELF")


class _Open(Referent):
    def __init__(self, info: dict[str, str]) -> None:
        super().__init__()
        self.info = info
        self.buffers = AttachedBuffers()


class Session(Handle):
    """A session of this process; SESSION_NULL once finalized or never initialized."""

    _null_name = "SESSION_NULL"

    @property
    def _s(self) -> _Open:
        if self._ref is None:
            raise err.Exception(err.ERR_SESSION, "this is SESSION_NULL (or a finalized session)")
        return self._ref

    @classmethod
    def Init(cls, info: Info = INFO_NULL, errhandler: handlers.Errhandler | None = None) -> "Session":
        """Start a session (joining the job if this process has not yet)."""
        if not isinstance(info, Info):
            raise TypeError(f"info must be an MPI.Info, got {type(info).__name__}")
        from meshcomm.mpi import world

        world.runtime()
        session = cls._naming(_Open({"thread_level": "MPI_THREAD_SERIALIZED", **dict(info.items())}))
        if errhandler is not None:
            session.Set_errhandler(errhandler)
        return session

    def Finalize(self) -> None:
        self._s
        self._forget()

    _free_call = "Finalize"

    def Get_num_psets(self, info: Info = INFO_NULL) -> int:
        self._s
        return len(PSETS)

    def Get_nth_pset(self, n: int, info: Info = INFO_NULL) -> str:
        self._s
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if not 0 <= n < len(PSETS):
            raise err.Exception(err.ERR_ARG, f"n must be in [0, {len(PSETS)}), got {n}")
        return PSETS[n]

    def Attach_buffer(self, buf) -> None:
        self._s.buffers.attach(buf)

    def Detach_buffer(self):
        return self._s.buffers.detach()

    def Flush_buffer(self) -> None:
        self._s.buffers.flush()

    def Iflush_buffer(self):
        return self._s.buffers.iflush()

    def Get_info(self) -> Info:
        return Info.Create(self._s.info)

    def _members(self, pset_name: str) -> tuple[tuple[int, ...], int]:
        self._s
        from meshcomm.mpi import world

        rt = world.runtime()
        if pset_name == "mpi://WORLD":
            return tuple(range(rt.world.size)), rt.rank
        if pset_name == "mpi://SELF":
            return (rt.rank,), rt.rank
        raise err.Exception(err.ERR_ARG, f"no process set is named {pset_name!r}; there are {', '.join(PSETS)}")

    def Get_pset_info(self, pset_name: str) -> Info:
        """mpi_size: how many processes the set has."""
        ranks, _ = self._members(pset_name)
        return Info.Create({"mpi_size": str(len(ranks))})

    def Create_group(self, pset_name: str):
        """The group of a process set's processes."""
        from meshcomm.mpi.groups import Group

        ranks, me = self._members(pset_name)
        return Group._of(ranks, me)



SESSION_NULL = Session._naming(None, constant=True)
handlers.install(Session, "session", lambda session: session._s)


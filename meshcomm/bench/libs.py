"""The libraries a benchmark can time, behind one small interface: meshcomm, torch's gloo, MPICH through mpi4py.

Each library binds one (collective, buffers) point to a zero-argument call,
so the worker's timing loop is the same code for all of them, and gathers the
per-iteration times with its own all-gather, outside the timed region. torch
and mpi4py are imported inside, when that library is chosen: they are rivals
to measure against, never dependencies.
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from meshcomm.bench.data import Buffers
from meshcomm.bench.sizes import Layout

LIBS: tuple[str, ...] = ("meshcomm", "gloo", "mpich", "mpich-yield")

# What each rival needs, said the way a user can act on it.
INSTALL_HINTS: dict[str, str] = {
    "torch": "pip install torch==2.13.0",
    "mpi4py": "apt-get install -y mpich libmpich-dev && pip install --no-binary mpi4py mpi4py",
    "mpiexec": "apt-get install -y mpich libmpich-dev",
}

# The `mpich-yield` variant: MPICH whose waits hand the core over. MPICH 4 (ch4) ignores
# MPIR_CVAR_POLLS_BEFORE_YIELD, so each collective is its nonblocking twin completed by
# `while not req.Test(): os.sched_yield()` (shared/MEASUREMENTS.md): the fair rival when ranks outnumber cores.
MPICH_YIELD_HOW = "nonblocking calls completed by Test() + sched_yield()"

Call = Callable[[], None]


class Library:
    """One communication library inside one rank: bind calls, gather times, shut down."""

    name = ""
    rank = 0
    size = 1

    def describe(self) -> str:
        raise NotImplementedError

    def bind(self, lay: Layout, bufs: Buffers, root: int, op: str | None, algorithm: str | None) -> Call:
        """A call running `lay.collective` once on `bufs` (the timed unit); op is None unless it reduces."""
        raise NotImplementedError

    def all_gather(self, local: np.ndarray) -> np.ndarray:
        """Every rank's float64 vector `local`, as rows of a (size, len) array."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _torch_style_op(reduce_ops: Any, op: str | None) -> Any:
    """ReduceOp.SUM ... for 'sum' ...; None (no reduction) stays None."""
    return None if op is None else getattr(reduce_ops, "PRODUCT" if op == "prod" else op.upper())


def _blocks(array: np.ndarray, n: int) -> list[np.ndarray]:
    step = array.size // n if n else 0
    return [array[i * step : (i + 1) * step] for i in range(n)]


# The faces `meshcomm bench` times, by the names its collectives bind.
_FACES = ("all_reduce", "broadcast", "reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
          "gather", "scatter")


class Meshcomm(Library):
    name = "meshcomm"

    def __init__(self, timeout: float | None) -> None:
        import meshcomm as dist

        self._dist = dist
        dist.init_process_group(timeout=timeout)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def describe(self) -> str:
        return f"meshcomm {self._dist.__version__}"

    def bind(self, lay: Layout, bufs: Buffers, root: int, op: str | None, algorithm: str | None) -> Call:
        dist = self._dist
        send, recv = bufs.send, bufs.recv
        reduce_op = _torch_style_op(dist.ReduceOp, op)
        coll = lay.collective
        # Without --algo the calls are the ones a program writes (no `algorithm=None` for the face to bind), each
        # looked up on the module as a program's is.
        api = dist if algorithm is None else types.SimpleNamespace(
            **{name: functools.partial(getattr(dist, name), algorithm=algorithm) for name in _FACES})
        if coll == "all_reduce":
            return lambda: api.all_reduce(send, op=reduce_op)
        if coll == "broadcast":
            return lambda: api.broadcast(send, src=root)
        if coll == "reduce":
            return lambda: api.reduce(send, dst=root, op=reduce_op)
        if coll == "all_gather":
            return lambda: api.all_gather_into_tensor(recv, send)
        if coll == "reduce_scatter":
            return lambda: api.reduce_scatter_tensor(recv, send, op=reduce_op)
        if coll == "all_to_all":
            return lambda: api.all_to_all_single(recv, send)
        if coll == "gather":
            gather_list = _blocks(recv, self.size) if self.rank == root else None
            return lambda: api.gather(send, gather_list, dst=root)
        if coll == "scatter":
            scatter_list = _blocks(send, self.size) if self.rank == root else None
            return lambda: api.scatter(recv, scatter_list, src=root)
        return _pingpong(self.rank, lambda peer: dist.send(send, dst=peer), lambda peer: dist.recv(send, src=peer))

    def all_gather(self, local: np.ndarray) -> np.ndarray:
        out = np.empty(self.size * local.size, dtype=np.float64)
        self._dist.all_gather_into_tensor(out, np.ascontiguousarray(local, dtype=np.float64))
        return out.reshape(self.size, local.size)

    def close(self) -> None:
        self._dist.destroy_process_group()


class Gloo(Library):
    """torch.distributed with the gloo backend, on torch tensors sharing the numpy buffers."""

    name = "gloo"

    def __init__(self, timeout: float | None) -> None:
        from datetime import timedelta

        import torch
        import torch.distributed as tdist

        self._torch, self._tdist = torch, tdist
        # env:// rendezvous: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, as `meshcomm run` sets them.
        tdist.init_process_group("gloo", timeout=timedelta(seconds=timeout or 300))
        self.rank, self.size = tdist.get_rank(), tdist.get_world_size()
        # torch 2.13 renamed the *_tensor collectives *_single; older versions have only the old names.
        self._all_gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor
        self._reduce_scatter = getattr(tdist, "reduce_scatter_single", None) or tdist.reduce_scatter_tensor

    def describe(self) -> str:
        return f"torch {self._torch.__version__} gloo"

    def bind(self, lay: Layout, bufs: Buffers, root: int, op: str | None, algorithm: str | None) -> Call:
        tdist, t = self._tdist, self._torch.from_numpy
        send, recv = t(bufs.send), t(bufs.recv)
        reduce_op = _torch_style_op(tdist.ReduceOp, op)
        coll = lay.collective
        if coll == "all_reduce":
            return lambda: tdist.all_reduce(send, op=reduce_op)
        if coll == "broadcast":
            return lambda: tdist.broadcast(send, src=root)
        if coll == "reduce":
            return lambda: tdist.reduce(send, dst=root, op=reduce_op)
        if coll == "all_gather":
            return lambda: self._all_gather(recv, send)
        if coll == "reduce_scatter":
            return lambda: self._reduce_scatter(recv, send, op=reduce_op)
        if coll == "all_to_all":
            return lambda: tdist.all_to_all_single(recv, send)
        if coll == "gather":
            gather_list = [t(b) for b in _blocks(bufs.recv, self.size)] if self.rank == root else None
            return lambda: tdist.gather(send, gather_list, dst=root)
        if coll == "scatter":
            scatter_list = [t(b) for b in _blocks(bufs.send, self.size)] if self.rank == root else None
            return lambda: tdist.scatter(recv, scatter_list, src=root)
        return _pingpong(self.rank, lambda peer: tdist.send(send, dst=peer), lambda peer: tdist.recv(send, src=peer))

    def all_gather(self, local: np.ndarray) -> np.ndarray:
        out = self._torch.empty(self.size * local.size, dtype=self._torch.float64)
        self._all_gather(out, self._torch.from_numpy(np.ascontiguousarray(local, dtype=np.float64)))
        return out.numpy().reshape(self.size, local.size)

    def close(self) -> None:
        self._tdist.destroy_process_group()


class Mpi(Library):
    """mpi4py's buffer methods (Allreduce, Bcast, ...) on the numpy buffers, started by mpiexec."""

    def __init__(self, name: str) -> None:
        from mpi4py import MPI

        self.name = name
        self._mpi = MPI
        self._comm = MPI.COMM_WORLD
        self.rank, self.size = self._comm.Get_rank(), self._comm.Get_size()

    def describe(self) -> str:
        from mpi4py import __version__

        library = self._mpi.Get_library_version().strip().splitlines()[0].replace("\t", " ")
        extra = f" ({MPICH_YIELD_HOW})" if self.name == "mpich-yield" else ""
        return f"mpi4py {__version__}, {library}{extra}"

    def bind(self, lay: Layout, bufs: Buffers, root: int, op: str | None, algorithm: str | None) -> Call:
        MPI, comm = self._mpi, self._comm
        if bufs.send.dtype == np.float16:
            # MPICH 4.0.2 maps it to MPIX_C_FLOAT16 and aborts inside yaksa's pack code.
            raise ValueError("float16 is not benchmarked on MPI (MPICH 4.0 aborts on MPIX_C_FLOAT16); "
                             "pick another --dtype")
        if op == "avg":
            raise ValueError("MPI has no average reduction; use --op sum")
        reduce_op = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX, None: None}[op]
        send, recv = bufs.send, bufs.recv
        coll = lay.collective
        if self.name == "mpich-yield":
            return self._bind_yielding(coll, send, recv, root, reduce_op)
        if coll == "all_reduce":
            return lambda: comm.Allreduce(MPI.IN_PLACE, send, op=reduce_op)
        if coll == "broadcast":
            return lambda: comm.Bcast(send, root=root)
        if coll == "reduce":
            if self.rank == root:
                return lambda: comm.Reduce(MPI.IN_PLACE, send, op=reduce_op, root=root)
            return lambda: comm.Reduce(send, None, op=reduce_op, root=root)
        if coll == "all_gather":
            return lambda: comm.Allgather(send, recv)
        if coll == "reduce_scatter":
            return lambda: comm.Reduce_scatter_block(send, recv, op=reduce_op)
        if coll == "all_to_all":
            return lambda: comm.Alltoall(send, recv)
        if coll == "gather":
            target = recv if self.rank == root else None
            return lambda: comm.Gather(send, target, root=root)
        if coll == "scatter":
            source = send if self.rank == root else None
            return lambda: comm.Scatter(source, recv, root=root)
        return _pingpong(self.rank, lambda peer: comm.Send(send, dest=peer), lambda peer: comm.Recv(send, source=peer))

    def _bind_yielding(self, coll: str, send, recv, root: int, reduce_op) -> Call:
        """The nonblocking twin of each call, waited for by Test() and sched_yield()."""
        MPI, comm = self._mpi, self._comm
        if coll == "pingpong":
            return _pingpong(self.rank, lambda peer: _yield_until_done(comm.Isend(send, dest=peer)),
                             lambda peer: _yield_until_done(comm.Irecv(send, source=peer)))
        is_root = self.rank == root
        starts: dict[str, Callable[[], Any]] = {
            "all_reduce": lambda: comm.Iallreduce(MPI.IN_PLACE, send, op=reduce_op),
            "broadcast": lambda: comm.Ibcast(send, root=root),
            "reduce": (lambda: comm.Ireduce(MPI.IN_PLACE, send, op=reduce_op, root=root)) if is_root
            else (lambda: comm.Ireduce(send, None, op=reduce_op, root=root)),
            "all_gather": lambda: comm.Iallgather(send, recv),
            "reduce_scatter": lambda: comm.Ireduce_scatter_block(send, recv, op=reduce_op),
            "all_to_all": lambda: comm.Ialltoall(send, recv),
            "gather": lambda: comm.Igather(send, recv if is_root else None, root=root),
            "scatter": lambda: comm.Iscatter(send if is_root else None, recv, root=root),
        }
        start = starts[coll]
        return lambda: _yield_until_done(start())

    def all_gather(self, local: np.ndarray) -> np.ndarray:
        mine = np.ascontiguousarray(local, dtype=np.float64)
        out = np.empty((self.size, mine.size), dtype=np.float64)
        self._comm.Allgather(mine, out)
        return out

    def close(self) -> None:
        pass  # mpi4py finalizes MPI at exit


def _yield_until_done(request) -> None:
    while not request.Test():
        os.sched_yield()


def _pingpong(rank: int, send: Callable[[int], Any], recv: Callable[[int], Any]) -> Call:
    """One round trip between ranks 0 and 1; other ranks sit it out."""
    if rank == 0:
        def run() -> None:
            send(1)
            recv(1)
    elif rank == 1:
        def run() -> None:
            recv(0)
            send(0)
    else:
        def run() -> None:
            pass
    return run


def open_library(name: str, timeout: float | None = None) -> Library:
    """Initialize library `name` in this process (meshcomm and gloo from `meshcomm run`, MPI from mpiexec)."""
    if name == "meshcomm":
        return Meshcomm(timeout)
    if name == "gloo":
        return Gloo(timeout)
    if name in ("mpich", "mpich-yield"):
        return Mpi(name)
    raise ValueError(f"lib must be one of {', '.join(LIBS)}, got {name!r}")

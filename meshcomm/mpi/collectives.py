"""Intracomm's collectives: lowercase for pickled objects, Capitalized for buffers.

Each call checks its root and message specifications, then becomes one
meshcomm collective on the communicator's group (a Problem with per-rank
counts, which is how the v-variants' uneven counts go through unchanged).
Where MPI lets ranks know less than the Problem needs (Gatherv's other
counts, Scatterv's counts off the root), one small exchange comes first.
"""

from __future__ import annotations

import numpy as np

from meshcomm.algorithms.problem import Problem
from meshcomm.api import collectives as coll
from meshcomm.api import objects
from meshcomm.executor.reduce_ops import combiner
from meshcomm.group.call import Call
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi import messages as msg
from meshcomm.mpi import ops as mpi_ops
from meshcomm.mpi.comm import Intracomm
from meshcomm.mpi.request import Prequest, Request

IN_PLACE = msg.IN_PLACE


def _in_place(buf) -> bool:
    """IN_PLACE, or None where mpi4py reads a missing buffer as IN_PLACE."""
    return buf is IN_PLACE or buf is None


def _root(g, root) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < g.size:
        raise err.Exception(err.ERR_ROOT, f"root must be a rank in [0, {g.size}), got {root!r}")
    return int(root)


def _movable(array: np.ndarray) -> np.ndarray:
    """Numeric arrays travel as they are; others (chars, MAXLOC pairs) as their bytes."""
    return array if array.dtype.kind in "biufc" else array.view(np.uint8)


def _run(g, problem: Problem, send: np.ndarray, out: np.ndarray, op_name: str = "none", combine=None) -> None:
    buffers = {"input": send, "output": out}
    g.collective(Call(problem, buffers, send.dtype.name, op=op_name, combine=combine))


def _exchange_counts(g, mine: int) -> list[int]:
    table = np.empty(g.size, dtype=np.int64)
    coll.all_gather_into_tensor(table, np.array([mine], dtype=np.int64), group=g)
    return [int(x) for x in table]


# ----- objects


def _bcast(self, obj, root: int = 0):
    g = self._g
    root = _root(g, root)
    box = [obj]
    objects.broadcast_object_list(box, group_src=root, group=g)
    return obj if g.rank == root else box[0]


def _gather(self, sendobj, root: int = 0):
    g = self._g
    root = _root(g, root)
    out = [None] * g.size if g.rank == root else None
    objects.gather_object(sendobj, out, group_dst=root, group=g)
    return out


def _one_per_rank(sendobj, size: int, what: str, per: str = "rank") -> list:
    """The objects to send, one per rank; None sends None to every rank, as mpi4py does."""
    items = [None] * size if sendobj is None else list(sendobj)
    if len(items) != size:
        raise ValueError(f"{what} needs one object per {per} ({size}), got {len(items)}")
    return items


def _scatter(self, sendobj, root: int = 0):
    g = self._g
    root = _root(g, root)
    items = _one_per_rank(sendobj, g.size, "scatter") if g.rank == root else None
    out = [None]
    objects.scatter_object_list(out, items, group_src=root, group=g)
    return out[0]


def _allgather(self, sendobj):
    g = self._g
    out = [None] * g.size
    objects.all_gather_object(out, sendobj, group=g)
    return out


def _alltoall(self, sendobj):
    g = self._g
    items = _one_per_rank(sendobj, g.size, "alltoall")
    frames = [objects.dumps(item) for item in items]
    sizes = np.array([f.size for f in frames], dtype=np.int64)
    incoming = np.empty(g.size, dtype=np.int64)
    coll.all_to_all_single(incoming, sizes, group=g)
    received = [np.empty(int(n), dtype=np.uint8) for n in incoming]
    coll.all_to_all(received, frames, group=g)
    return [objects.loads(frame) for frame in received]


def _fold(op, values):
    result = values[0]
    for value in values[1:]:
        result = op(result, value)
    return result


def _reduce(self, sendobj, op=mpi_ops.SUM, root: int = 0):
    g = self._g
    root = _root(g, root)
    op = mpi_ops.resolve(op)
    values = _gather(self, sendobj, root)
    return _fold(op, values) if g.rank == root else None


def _allreduce(self, sendobj, op=mpi_ops.SUM):
    op = mpi_ops.resolve(op)
    return _fold(op, _allgather(self, sendobj))


def _scan(self, sendobj, op=mpi_ops.SUM):
    op = mpi_ops.resolve(op)
    values = _allgather(self, sendobj)
    return _fold(op, values[: self._g.rank + 1])


def _exscan(self, sendobj, op=mpi_ops.SUM):
    op = mpi_ops.resolve(op)
    values = _allgather(self, sendobj)
    rank = self._g.rank
    return None if rank == 0 else _fold(op, values[:rank])


def _barrier(self) -> None:
    coll.barrier(group=self._g)


# ----- buffers: data movement


def _Bcast(self, buf, root: int = 0) -> None:
    g = self._g
    root = _root(g, root)
    spec = msg.read_spec(buf, "buf", writable=g.rank != root)
    coll.broadcast(_movable(spec.array), group_src=root, group=g)


def _gatherv(g, sendbuf, recvbuf, root: int, vector: bool) -> None:
    at_root = g.rank == root
    recv = msg.read_vector(recvbuf, "recvbuf", g.size, writable=True) if at_root else None
    if at_root and _in_place(sendbuf):
        send = recv.piece(root).copy()
    else:
        send = msg.read_spec(sendbuf, "sendbuf").array
    moved = _movable(send)
    counts = _exchange_counts(g, moved.size) if vector else [moved.size] * g.size
    if at_root:
        expected = [_movable(recv.piece(r)).size for r in range(g.size)]
        if expected != counts:
            raise err.Exception(err.ERR_COUNT, f"recvbuf expects {expected} elements per rank, ranks send {counts}")
    out = np.empty(sum(counts) if at_root else 0, dtype=moved.dtype)
    _run(g, Problem("gather", g.size, tuple(counts), root), moved, out)
    if at_root:
        _unpack(out, recv, moved.dtype)


def _unpack(out: np.ndarray, recv: msg.VectorSpec, dtype: np.dtype) -> None:
    """Copy rank-ordered pieces of `out` (in `dtype` units) to their places in the receive buffer."""
    offset = 0
    for r in range(len(recv.counts)):
        target = _movable(recv.piece(r))
        target[...] = out[offset : offset + target.size]
        offset += target.size


def _Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
    g = self._g
    _gatherv(g, sendbuf, recvbuf, _root(g, root), vector=False)


def _Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
    g = self._g
    _gatherv(g, sendbuf, recvbuf, _root(g, root), vector=True)


def _scatterv(g, sendbuf, recvbuf, root: int, vector: bool) -> None:
    at_root = g.rank == root
    send = msg.read_vector(sendbuf, "sendbuf", g.size) if at_root else None
    if at_root and _in_place(recvbuf):
        recv = send.piece(root).copy()
        write_back = None
    else:
        recv = msg.read_spec(recvbuf, "recvbuf", writable=True).array
        write_back = recv
    moved_recv = _movable(recv)
    if at_root:
        pieces = [_movable(send.piece(r)) for r in range(g.size)]
        counts = np.array([p.size for p in pieces], dtype=np.int64)
        joined = np.concatenate(pieces) if pieces else np.empty(0, moved_recv.dtype)
    else:
        counts = np.empty(g.size, dtype=np.int64) if vector else np.full(g.size, moved_recv.size, dtype=np.int64)
        joined = np.empty(0, dtype=moved_recv.dtype)
    if vector:
        coll.broadcast(counts, group_src=root, group=g)
    if int(counts[g.rank]) != moved_recv.size:
        raise err.Exception(err.ERR_COUNT, f"recvbuf holds {moved_recv.size} elements but the root sends "
                                           f"{int(counts[g.rank])}")
    out = moved_recv if write_back is not None else np.empty_like(moved_recv)
    _run(g, Problem("scatter", g.size, tuple(int(c) for c in counts), root), joined, out)


def _Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
    g = self._g
    _scatterv(g, sendbuf, recvbuf, _root(g, root), vector=False)


def _Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
    g = self._g
    _scatterv(g, sendbuf, recvbuf, _root(g, root), vector=True)


def _allgatherv(g, sendbuf, recvbuf) -> None:
    recv = msg.read_vector(recvbuf, "recvbuf", g.size, writable=True)
    send = recv.piece(g.rank).copy() if _in_place(sendbuf) else msg.read_spec(sendbuf, "sendbuf").array
    moved = _movable(send)
    counts = [_movable(recv.piece(r)).size for r in range(g.size)]
    if counts[g.rank] != moved.size:
        raise err.Exception(err.ERR_COUNT, f"sendbuf has {moved.size} elements, recvbuf's slot for this rank "
                                           f"{counts[g.rank]}")
    out = np.empty(sum(counts), dtype=moved.dtype)
    _run(g, Problem("all_gather", g.size, tuple(counts)), moved, out)
    _unpack(out, recv, moved.dtype)


def _Allgather(self, sendbuf, recvbuf) -> None:
    _allgatherv(self._g, sendbuf, recvbuf)


_Allgatherv = _Allgather


def _alltoallv(g, sendbuf, recvbuf, vector: bool) -> None:
    recv = msg.read_vector(recvbuf, "recvbuf", g.size, writable=True)
    if _in_place(sendbuf):
        send = msg.VectorSpec(recv.whole.copy(), recv.counts, recv.displs, recv.datatype)
    else:
        send = msg.read_vector(sendbuf, "sendbuf", g.size)
    pieces = [_movable(send.piece(r)) for r in range(g.size)]
    targets = [_movable(recv.piece(r)) for r in range(g.size)]
    joined = np.concatenate(pieces)
    out = np.empty(sum(t.size for t in targets), dtype=joined.dtype)
    sent = [p.size for p in pieces]
    if vector:
        matrix = coll._exchange_matrix(g, sent, [t.size for t in targets], None)
    else:
        if sent != [t.size for t in targets]:
            raise err.Exception(err.ERR_COUNT, f"Alltoall sends {sent} and receives {[t.size for t in targets]} "
                                               "elements per rank; they must be equal")
        matrix = tuple(sent[0] for _ in range(g.size * g.size))
    _run(g, Problem("all_to_all", g.size, matrix), joined, out)
    offset = 0
    for target in targets:
        target[...] = out[offset : offset + target.size]
        offset += target.size


def _Alltoall(self, sendbuf, recvbuf) -> None:
    _alltoallv(self._g, sendbuf, recvbuf, vector=False)


def _Alltoallv(self, sendbuf, recvbuf) -> None:
    _alltoallv(self._g, sendbuf, recvbuf, vector=True)


# ----- buffers: reductions


def _native(op: mpi_ops.Op, array: np.ndarray):
    """meshcomm's own (op name, combine) for this op and dtype, or None to fold contributions here."""
    if op.native is None or array.dtype.kind not in "biufc":
        return None
    try:
        return op.native, combiner(op.native, array.dtype, None)
    except (TypeError, ValueError):
        return None


def _contributions(g, send: np.ndarray) -> list[np.ndarray]:
    """Every rank's send array, on every rank (for ops meshcomm does not reduce itself)."""
    moved = _movable(send)
    out = np.empty(moved.size * g.size, dtype=moved.dtype)
    _run(g, Problem("all_gather", g.size, (moved.size,) * g.size), moved, out)
    return [piece.view(send.dtype) for piece in np.split(out, g.size)] if g.size else []


def _folded(op, arrays: list[np.ndarray]) -> np.ndarray:
    result = arrays[0].copy()
    for array in arrays[1:]:
        result = op.combine_arrays(result, array)
    return result


def _operands(sendbuf, recvbuf, writable_recv: bool = True):
    recv = msg.read_spec(recvbuf, "recvbuf", writable=writable_recv).array
    send = recv.copy() if _in_place(sendbuf) else msg.read_spec(sendbuf, "sendbuf").array
    if recvbuf is not None:
        _alike(send, recv)
        if send.size != recv.size:
            raise ValueError(f"mismatch in send count {send.size} and receive count {recv.size}")
    return send, recv


def _alike(send: np.ndarray, recv: np.ndarray) -> None:
    """A reduction's buffers hold one datatype, as mpi4py checks before calling MPI."""
    if send.dtype != recv.dtype:
        raise ValueError(f"mismatch in send and receive datatypes: sendbuf holds {send.dtype}, recvbuf {recv.dtype}")


def _Allreduce(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    g = self._g
    op = mpi_ops.resolve(op)
    send, recv = _operands(sendbuf, recvbuf)
    native = _native(op, send)
    if native is None:
        recv[...] = _folded(op, _contributions(g, send))
        return
    name, combine = native
    recv[...] = send
    _run(g, Problem("all_reduce", g.size, (recv.size,)), recv, recv, name, combine)


def _Reduce(self, sendbuf, recvbuf, op=mpi_ops.SUM, root: int = 0) -> None:
    g = self._g
    root = _root(g, root)
    op = mpi_ops.resolve(op)
    at_root = g.rank == root
    if at_root:
        send, recv = _operands(sendbuf, recvbuf)
    else:
        send = msg.read_spec(sendbuf, "sendbuf").array
        recv = None
    native = _native(op, send)
    if native is None:
        result = _folded(op, _contributions(g, send))
        if at_root:
            recv[...] = result
        return
    name, combine = native
    out = recv if at_root else np.empty_like(send)
    if at_root:
        recv[...] = send
    _run(g, Problem("reduce", g.size, (send.size,), root), recv if at_root else send, out, name, combine)


def _prefix(self, sendbuf, recvbuf, op, exclusive: bool) -> None:
    g = self._g
    op = mpi_ops.resolve(op)
    send, recv = _operands(sendbuf, recvbuf)
    native = _native(op, send)
    if native is None:
        upto = g.rank if exclusive else g.rank + 1
        arrays = _contributions(g, send)
        if upto > 0:
            recv[...] = _folded(op, arrays[:upto])
        return
    name, combine = native
    recv[...] = send
    _run(g, Problem("exscan" if exclusive else "scan", g.size, (recv.size,)), recv, recv, name, combine)


def _Scan(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    _prefix(self, sendbuf, recvbuf, op, exclusive=False)


def _Exscan(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    _prefix(self, sendbuf, recvbuf, op, exclusive=True)


def _reduce_scatter(g, sendbuf, recvbuf, counts: list[int] | None, op) -> None:
    op = mpi_ops.resolve(op)
    in_place = _in_place(sendbuf)
    recv_spec = msg.read_spec(recvbuf, "recvbuf", writable=True).array
    send = recv_spec.copy() if in_place else msg.read_spec(sendbuf, "sendbuf").array
    _alike(send, recv_spec)
    if counts is None:
        if send.size % g.size:
            raise ValueError(f"sendbuf's {send.size} elements do not split over {g.size} ranks")
        counts = [send.size // g.size] * g.size
    counts = [int(c) for c in counts]
    if len(counts) != g.size or sum(counts) != send.size:
        raise ValueError(f"recvcounts {counts} must give one count per rank and add up to "
                         f"sendbuf's {send.size} elements")
    out = recv_spec[: counts[g.rank]]
    if out.size != counts[g.rank]:
        raise ValueError(f"recvbuf holds {recv_spec.size} elements, this rank gets {counts[g.rank]}")
    native = _native(op, send)
    if native is None:
        start = sum(counts[: g.rank])
        out[...] = _folded(op, _contributions(g, send))[start : start + counts[g.rank]]
        return
    name, combine = native
    result = np.empty(counts[g.rank], dtype=send.dtype)
    _run(g, Problem("reduce_scatter", g.size, tuple(counts)), np.ascontiguousarray(send), result, name, combine)
    out[...] = result


def _Reduce_scatter_block(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    g = self._g
    if _in_place(sendbuf):
        _reduce_scatter(g, sendbuf, recvbuf, None, op)
        return
    recv = msg.read_spec(recvbuf, "recvbuf", writable=True).array
    _reduce_scatter(g, sendbuf, recvbuf, [recv.size] * g.size, op)


def _Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=mpi_ops.SUM) -> None:
    g = self._g
    if recvcounts is None and not _in_place(sendbuf):
        recv = msg.read_spec(recvbuf, "recvbuf", writable=True).array
        recvcounts = _exchange_counts(g, recv.size)
    _reduce_scatter(g, sendbuf, recvbuf, recvcounts, op)


_METHODS = {
    "bcast": _bcast, "gather": _gather, "scatter": _scatter, "allgather": _allgather, "alltoall": _alltoall,
    "reduce": _reduce, "allreduce": _allreduce, "scan": _scan, "exscan": _exscan,
    "barrier": _barrier, "Barrier": _barrier,
    "Bcast": _Bcast, "Gather": _Gather, "Gatherv": _Gatherv, "Scatter": _Scatter, "Scatterv": _Scatterv,
    "Allgather": _Allgather, "Allgatherv": _Allgatherv, "Alltoall": _Alltoall, "Alltoallv": _Alltoallv,
    "Allreduce": _Allreduce, "Reduce": _Reduce, "Scan": _Scan, "Exscan": _Exscan,
    "Reduce_scatter": _Reduce_scatter, "Reduce_scatter_block": _Reduce_scatter_block,
}
# The buffer collectives MPI also has nonblocking (Ibcast) and persistent (Bcast_init) forms of.
_STARTABLE = (
    "Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
    "Alltoallv", "Reduce", "Allreduce", "Scan", "Exscan", "Reduce_scatter", "Reduce_scatter_block",
)


def _in_lane(name: str, method):
    def blocking(self, *args, **kwargs):
        g = self._live
        return lane.lane(g).run(lambda: method(self, *args, **kwargs))

    blocking.__name__ = blocking.__qualname__ = name
    blocking.__doc__ = method.__doc__
    return blocking


def _started(name: str, method):
    """Ibcast and its kin: the blocking collective, run in the communicator's lane; a Request for it."""

    def start(self, *args, **kwargs) -> Request:
        g = self._live
        work = lane.lane(g).start(lambda: method(self, *args, **kwargs), name)
        return Request(g.mailbox, work, lambda _message: work._result)

    start.__name__ = start.__qualname__ = f"I{name[0].lower()}{name[1:]}"
    return start


def _persistent(name: str, method):
    """Bcast_init and its kin: a Prequest whose every Start runs the collective again on the same arguments."""

    def init(self, *args, **kwargs) -> Prequest:
        g = self._live
        in_lane = lane.lane(g)
        return Prequest(g.mailbox, lambda: in_lane.start(lambda: method(self, *args, **kwargs), name))

    init.__name__ = init.__qualname__ = f"{name}_init"
    return init


# Receive buffers with derived datatypes are filled as packed copies, written back when the collective returns.
_METHODS = {_name: msg.writing_back(_method) for _name, _method in _METHODS.items()}

for _name, _method in _METHODS.items():
    setattr(Intracomm, _name, _in_lane(_name, _method))
for _name in _STARTABLE:
    setattr(Intracomm, f"I{_name[0].lower()}{_name[1:]}", _started(_name, _METHODS[_name]))
    setattr(Intracomm, f"{_name}_init", _persistent(_name, _METHODS[_name]))
Intracomm.ibarrier = Intracomm.Ibarrier

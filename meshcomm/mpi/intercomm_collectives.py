"""Intercomm's collectives: one group's data goes to the other group, with MPI's root conventions.

A rooted call names its root on both sides: the root passes MPI.ROOT, the
rest of its group MPI.PROC_NULL (they take no part), and the other group
passes the root's rank there. Each call is the local group's own
collectives plus messages between the two sides' leaders (local rank 0),
as MPICH does it: a gather or reduce goes to the leader, one message
crosses, and the other leader broadcasts or scatters it on its side. So
each side keeps meshcomm's fast intracomm paths, and neither needs counts
only the other side knows. Alltoall is the exception: every rank sends
each remote rank its piece directly. Crossing messages go through the
intercomm's collective mailbox under a tag every rank numbers alike.
Cost: a rooted call is one local collective and one message across; an
all-to-all-sides call (Allgather, Allreduce, ...) two local collectives
and one swap between the leaders; Alltoall one message per pair of ranks.

Every call reads and checks its arguments before it takes its tag, so a
call refused on one rank does not shift that rank's count. A leader that
receives a message of the wrong size still does its side's local step
before it raises, so its side's other ranks are not left waiting for it
until the timeout.
"""

from __future__ import annotations

import numpy as np

from meshcomm.algorithms.problem import Problem
from meshcomm.api import collectives as coll
from meshcomm.mpi import collectives as intra
from meshcomm.mpi import constants as C
from meshcomm.mpi import datatypes as dt
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi import ops as mpi_ops
from meshcomm.mpi.comm import pickle_codec
from meshcomm.mpi.intercomm import Intercomm

_BYTE = dt.PREDEFINED["BYTE"]


def _root(g, root) -> int:
    """MPI.ROOT, MPI.PROC_NULL, or a rank of the remote group; ERR_ROOT otherwise."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or \
            not (root in (C.ROOT, C.PROC_NULL) or 0 <= root < g.remote_size):
        raise err.Exception(err.ERR_ROOT, f"root must be MPI.ROOT, MPI.PROC_NULL or a rank of the remote group "
                                          f"in [0, {g.remote_size}), got {root!r}")
    return int(root)


def _spec(buf, name: str, writable: bool = False) -> msg.Spec:
    if buf is msg.IN_PLACE:
        raise err.Exception(err.ERR_ARG, f"{name}: MPI.IN_PLACE cannot be used on an intercommunicator")
    return msg.read_spec(buf, name, writable)


def _vector(buf, name: str, nranks: int, writable: bool = False) -> msg.VectorSpec:
    if buf is msg.IN_PLACE:
        raise err.Exception(err.ERR_ARG, f"{name}: MPI.IN_PLACE cannot be used on an intercommunicator")
    return msg.read_vector(buf, name, nranks, writable)


def _bytes(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint8)


def _receive(g, source: int, tag: int) -> memoryview:
    posted = g.channel.recv(source, tag)
    posted.wait()
    return posted.message.payload


def _fill(target: np.ndarray, payload, source: int) -> err.Exception | None:
    """Copy a message into `target` (bytes); the error to raise, after the local step, when the sizes differ."""
    data = np.frombuffer(payload, dtype=np.uint8)
    n = min(data.size, target.size)
    target[:n] = data[:n]
    if data.size == target.size:
        return None
    kind = err.ERR_TRUNCATE if data.size > target.size else err.ERR_COUNT
    return err.Exception(kind, f"remote rank {source} sent {data.size} bytes where {target.size} were expected")


def _unpack(joined: np.ndarray, recv: msg.VectorSpec) -> None:
    """Rank-ordered bytes to their pieces of a vector receive buffer."""
    offset = 0
    for r in range(len(recv.counts)):
        target = _bytes(recv.piece(r))
        target[...] = joined[offset : offset + target.size]
        offset += target.size


def _expected(recv: msg.VectorSpec) -> int:
    return sum(_bytes(recv.piece(r)).size for r in range(len(recv.counts)))


def _gather_to_leader(g, send: np.ndarray, vector: bool) -> np.ndarray:
    """This side's bytes in rank order at the leader (empty elsewhere); a v-call's counts are exchanged first."""
    local = g.local
    counts = intra._exchange_counts(local, send.size) if vector else [send.size] * local.size
    out = np.empty(sum(counts) if local.rank == 0 else 0, dtype=np.uint8)
    intra._run(local, Problem("gather", local.size, tuple(counts), 0), send, out)
    return out


def _scatter_from_leader(g, joined: np.ndarray, counts: list[int], out: np.ndarray) -> None:
    """The leader's bytes, `counts[r]` of them to local rank r (every rank knows the counts)."""
    local = g.local
    intra._run(local, Problem("scatter", local.size, tuple(counts), 0), joined, out)


# ----- buffers


def _Barrier(self) -> None:
    g = self._g
    tag = g.next_tag()
    coll.barrier(group=g.local)
    if g.rank == 0:
        g.swap_with_other_leader(b"", tag)
    coll.barrier(group=g.local)


def _Bcast(self, buf, root: int = 0) -> None:
    g = self._g
    root = _root(g, root)
    data = None if root == C.PROC_NULL else _bytes(_spec(buf, "buf", writable=root != C.ROOT).array)
    tag = g.next_tag()
    if root == C.ROOT:
        g.channel.send(0, tag, data).wait()
    elif root != C.PROC_NULL:
        error = _fill(data, _receive(g, root, tag), root) if g.rank == 0 else None
        coll.broadcast(data, group_src=0, group=g.local)
        if error is not None:
            raise error


def _gatherv(self, sendbuf, recvbuf, root: int, vector: bool) -> None:
    g = self._g
    root = _root(g, root)
    if root == C.ROOT:
        recv = _vector(recvbuf, "recvbuf", g.remote_size, writable=True)
    elif root != C.PROC_NULL:
        send = _bytes(_spec(sendbuf, "sendbuf").array)
    tag = g.next_tag()
    if root == C.ROOT:
        joined = np.empty(_expected(recv), dtype=np.uint8)
        error = _fill(joined, _receive(g, 0, tag), 0)
        _unpack(joined, recv)
        if error is not None:
            raise error
    elif root != C.PROC_NULL:
        joined = _gather_to_leader(g, send, vector)
        if g.rank == 0:
            g.channel.send(root, tag, joined).wait()


def _Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
    _gatherv(self, sendbuf, recvbuf, root, vector=False)


def _Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
    _gatherv(self, sendbuf, recvbuf, root, vector=True)


def _scatterv(self, sendbuf, recvbuf, root: int) -> None:
    """The root sends its side's leader the byte count of every piece, then the pieces, in one message."""
    g = self._g
    root = _root(g, root)
    if root == C.ROOT:
        send = _vector(sendbuf, "sendbuf", g.remote_size)
        pieces = [_bytes(send.piece(r)) for r in range(g.remote_size)]
        counts = np.array([p.size for p in pieces], dtype=np.int64)
        frame = np.concatenate([_bytes(counts), *pieces])
    elif root != C.PROC_NULL:
        out = _bytes(_spec(recvbuf, "recvbuf", writable=True).array)
    tag = g.next_tag()
    if root == C.ROOT:
        g.channel.send(0, tag, frame).wait()
    elif root != C.PROC_NULL:
        if g.rank == 0:
            frame = np.frombuffer(_receive(g, root, tag), dtype=np.uint8)
            counts = frame[: 8 * g.size].view(np.int64)
            joined = [frame[8 * g.size :], ([int(c) for c in counts], None), _BYTE]
        else:
            joined = None
        intra._scatterv(g.local, joined, out, 0, vector=True)


def _Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
    _scatterv(self, sendbuf, recvbuf, root)


_Scatterv = _Scatter


def _allgatherv(self, sendbuf, recvbuf, vector: bool) -> None:
    g = self._g
    recv = _vector(recvbuf, "recvbuf", g.remote_size, writable=True)
    send = _bytes(_spec(sendbuf, "sendbuf").array)
    tag = g.next_tag()
    joined = _gather_to_leader(g, send, vector)
    incoming = np.empty(_expected(recv), dtype=np.uint8)
    error = _fill(incoming, g.swap_with_other_leader(joined, tag), 0) if g.rank == 0 else None
    coll.broadcast(incoming, group_src=0, group=g.local)
    _unpack(incoming, recv)
    if error is not None:
        raise error


def _Allgather(self, sendbuf, recvbuf) -> None:
    _allgatherv(self, sendbuf, recvbuf, vector=False)


def _Allgatherv(self, sendbuf, recvbuf) -> None:
    _allgatherv(self, sendbuf, recvbuf, vector=True)


def _swap_pieces(g, pieces: list[np.ndarray], land) -> None:
    """pieces[r] goes to remote rank r, straight; land(r, bytes) takes what r sent and returns an error or None."""
    tag = g.next_tag()
    sending = [g.channel.send(r, tag, piece) for r, piece in enumerate(pieces)]
    receiving = [g.channel.recv(r, tag) for r in range(g.remote_size)]
    errors = []
    for r, posted in enumerate(receiving):
        posted.wait()
        errors.append(land(r, posted.message.payload))
    for posted in sending:
        posted.wait()
    error = next((e for e in errors if e is not None), None)
    if error is not None:
        raise error


def _Alltoall(self, sendbuf, recvbuf) -> None:
    """Piece r of every rank's send buffer goes to remote rank r in one message."""
    g = self._g
    send = _vector(sendbuf, "sendbuf", g.remote_size)
    recv = _vector(recvbuf, "recvbuf", g.remote_size, writable=True)
    _swap_pieces(g, [_bytes(send.piece(r)) for r in range(g.remote_size)],
                 lambda r, payload: _fill(_bytes(recv.piece(r)), payload, r))


_Alltoallv = _Alltoall


def _Alltoallw(self, sendbuf, recvbuf) -> None:
    """Alltoall with a datatype, count and byte displacement per remote rank; pieces travel packed."""
    g = self._g
    if sendbuf is msg.IN_PLACE:
        raise err.Exception(err.ERR_ARG, "sendbuf: MPI.IN_PLACE cannot be used on an intercommunicator")
    send = msg.read_w(sendbuf, "sendbuf", g.remote_size)
    recv = msg.read_w(recvbuf, "recvbuf", g.remote_size, writable=True)

    def land(r: int, payload) -> err.Exception | None:
        piece = np.empty(recv.nbytes(r), dtype=np.uint8)
        error = _fill(piece, payload, r)
        recv.put(r, piece)
        return error

    _swap_pieces(g, [send.piece(r) for r in range(g.remote_size)], land)


# ----- buffers: reductions


def _reduce_to_leader(g, send: msg.Spec, op) -> np.ndarray | None:
    """This side's send buffers reduced at its leader (None elsewhere), by the local group's Reduce."""
    partial = np.empty_like(send.array) if g.rank == 0 else None
    g.local_comm.Reduce([send.array, send.datatype], None if partial is None else [partial, send.datatype],
                        op, root=0)
    return partial


def _Reduce(self, sendbuf, recvbuf, op=mpi_ops.SUM, root: int = 0) -> None:
    g = self._g
    root = _root(g, root)
    op = mpi_ops.resolve(op)
    if root == C.ROOT:
        target = _bytes(_spec(recvbuf, "recvbuf", writable=True).array)
    elif root != C.PROC_NULL:
        send = _spec(sendbuf, "sendbuf")
    tag = g.next_tag()
    if root == C.ROOT:
        error = _fill(target, _receive(g, 0, tag), 0)
        if error is not None:
            raise error
    elif root != C.PROC_NULL:
        partial = _reduce_to_leader(g, send, op)
        if partial is not None:
            g.channel.send(root, tag, _bytes(partial)).wait()


def _reduce_then_swap(g, send: msg.Spec, incoming: np.ndarray, op, tag: int) -> err.Exception | None:
    """This side's reduction goes to the other side; the other side's lands in the leader's `incoming` bytes."""
    partial = _reduce_to_leader(g, send, op)
    if partial is None:
        return None
    return _fill(incoming, g.swap_with_other_leader(_bytes(partial), tag), 0)


def _Allreduce(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    """Each group gets the reduction of the other group's send buffers."""
    g = self._g
    op = mpi_ops.resolve(op)
    send = _spec(sendbuf, "sendbuf")
    target = _bytes(_spec(recvbuf, "recvbuf", writable=True).array)
    tag = g.next_tag()
    error = _reduce_then_swap(g, send, target, op, tag)
    coll.broadcast(target, group_src=0, group=g.local)
    if error is not None:
        raise error


def _reduce_scatter(self, sendbuf, recvbuf, recvcounts, op) -> None:
    """The other group's send buffers reduced, then scattered over this group, recvcounts[r] elements to rank r."""
    g = self._g
    op = mpi_ops.resolve(op)
    send = _spec(sendbuf, "sendbuf")
    recv = _spec(recvbuf, "recvbuf", writable=True)
    counts = [int(c) for c in recvcounts]
    if len(counts) != g.size or counts[g.rank] != recv.array.size:
        raise err.Exception(err.ERR_COUNT, f"recvcounts {counts} must give one count per rank of this group "
                                           f"({g.size}), and this rank's must be recvbuf's {recv.array.size}")
    tag = g.next_tag()
    itemsize = recv.array.itemsize
    byte_counts = [c * itemsize for c in counts]
    incoming = np.empty(sum(byte_counts) if g.rank == 0 else 0, dtype=np.uint8)
    error = _reduce_then_swap(g, send, incoming, op, tag)
    _scatter_from_leader(g, incoming, byte_counts, _bytes(recv.array))
    if error is not None:
        raise error


def _Reduce_scatter_block(self, sendbuf, recvbuf, op=mpi_ops.SUM) -> None:
    g = self._g
    count = _spec(recvbuf, "recvbuf", writable=True).array.size
    _reduce_scatter(self, sendbuf, recvbuf, [count] * g.size, op)


def _Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=mpi_ops.SUM) -> None:
    g = self._g
    if recvcounts is None:
        recvcounts = intra._exchange_counts(g.local, _spec(recvbuf, "recvbuf", writable=True).array.size)
    _reduce_scatter(self, sendbuf, recvbuf, recvcounts, op)


# ----- objects


def _send_object(g, dest: int, tag: int, obj) -> None:
    g.channel.send(dest, tag, pickle_codec.dumps(obj)).wait()


def _receive_object(g, source: int, tag: int):
    return pickle_codec.loads(_receive(g, source, tag))


def _swap_objects(g, obj, tag: int):
    return pickle_codec.loads(g.swap_with_other_leader(pickle_codec.dumps(obj), tag))


def _one_per_remote_rank(g, sendobj, call: str) -> list:
    return intra._one_per_rank(sendobj, g.remote_size, call, "remote rank")


def _bcast(self, obj, root: int = 0):
    g = self._g
    root = _root(g, root)
    payload = pickle_codec.dumps(obj) if root == C.ROOT else None
    tag = g.next_tag()
    if root == C.ROOT:
        g.channel.send(0, tag, payload).wait()
    if root in (C.ROOT, C.PROC_NULL):
        return None
    return g.local_comm.bcast(_receive_object(g, root, tag) if g.rank == 0 else None, root=0)


def _gather(self, sendobj, root: int = 0):
    g = self._g
    root = _root(g, root)
    tag = g.next_tag()
    if root == C.ROOT:
        return _receive_object(g, 0, tag)
    if root == C.PROC_NULL:
        return None
    gathered = g.local_comm.gather(sendobj, root=0)
    if g.rank == 0:
        _send_object(g, root, tag, gathered)
    return None


def _scatter(self, sendobj, root: int = 0):
    g = self._g
    root = _root(g, root)
    payload = pickle_codec.dumps(_one_per_remote_rank(g, sendobj, "scatter")) if root == C.ROOT else None
    tag = g.next_tag()
    if root == C.ROOT:
        g.channel.send(0, tag, payload).wait()
    if root in (C.ROOT, C.PROC_NULL):
        return None
    return g.local_comm.scatter(_receive_object(g, root, tag) if g.rank == 0 else None, root=0)


def _allgather(self, sendobj):
    g = self._g
    tag = g.next_tag()
    gathered = g.local_comm.gather(sendobj, root=0)
    return g.local_comm.bcast(_swap_objects(g, gathered, tag) if g.rank == 0 else None, root=0)


def _alltoall(self, sendobj):
    g = self._g
    items = _one_per_remote_rank(g, sendobj, "alltoall")
    received = [None] * g.remote_size

    def land(r: int, payload) -> None:
        received[r] = pickle_codec.loads(payload)

    _swap_pieces(g, [pickle_codec.dumps(item) for item in items], land)
    return received


def _reduce(self, sendobj, op=mpi_ops.SUM, root: int = 0):
    g = self._g
    root = _root(g, root)
    op = mpi_ops.resolve(op)
    tag = g.next_tag()
    if root == C.ROOT:
        return _receive_object(g, 0, tag)
    if root == C.PROC_NULL:
        return None
    partial = g.local_comm.reduce(sendobj, op, root=0)
    if g.rank == 0:
        _send_object(g, root, tag, partial)
    return None


def _allreduce(self, sendobj, op=mpi_ops.SUM):
    g = self._g
    op = mpi_ops.resolve(op)
    tag = g.next_tag()
    partial = g.local_comm.reduce(sendobj, op, root=0)
    return g.local_comm.bcast(_swap_objects(g, partial, tag) if g.rank == 0 else None, root=0)


_METHODS = {
    "barrier": _Barrier, "Barrier": _Barrier,
    "bcast": _bcast, "gather": _gather, "scatter": _scatter, "allgather": _allgather, "alltoall": _alltoall,
    "reduce": _reduce, "allreduce": _allreduce,
    "Bcast": _Bcast, "Gather": _Gather, "Gatherv": _Gatherv, "Scatter": _Scatter, "Scatterv": _Scatterv,
    "Allgather": _Allgather, "Allgatherv": _Allgatherv, "Alltoall": _Alltoall, "Alltoallv": _Alltoallv,
    "Alltoallw": _Alltoallw,
    "Reduce": _Reduce, "Allreduce": _Allreduce,
    "Reduce_scatter": _Reduce_scatter, "Reduce_scatter_block": _Reduce_scatter_block,
}
_STARTABLE = (
    "Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
    "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Reduce_scatter", "Reduce_scatter_block",
)

# Receive buffers with derived datatypes are filled as packed copies, written back when the collective returns.
_METHODS = {_name: msg.writing_back(_method) for _name, _method in _METHODS.items()}

for _name, _method in _METHODS.items():
    setattr(Intercomm, _name, intra._in_lane(_name, _method))
for _name in _STARTABLE:
    setattr(Intercomm, f"I{_name[0].lower()}{_name[1:]}", intra._started(_name, _METHODS[_name]))
    setattr(Intercomm, f"{_name}_init", intra._persistent(_name, _METHODS[_name]))
Intercomm.ibarrier = Intercomm.Ibarrier

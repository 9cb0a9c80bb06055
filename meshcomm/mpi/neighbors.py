"""Neighbourhood collectives: each rank trades blocks with the sources and destinations of its topology.

They run as point-to-point messages along the topology's edges (the
group's isend/irecv, whose keys are apart from the mailbox's, so they never
meet user messages): one message per edge, where an all-to-all would touch
every pair of ranks. A message's tag is built from fixed fields: the
communicator's count of neighbourhood calls (every rank makes them in one
order, through the lane), a phase (an object's size, then its bytes), and
the edge's label, which names the receiver's slot for it (topology.py's
`labels`: the k-th edge between two ranks, or a Cartesian direction).
Blocks to PROC_NULL are not sent; blocks from PROC_NULL are left as they were.

Cost: one step; each rank sends one message of one block per destination
(objects: two, 8 bytes of size and then the pickle) and waits for one per source.
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from meshcomm.api import objects
from meshcomm.errors import MessageSizeError
from meshcomm.mpi import collectives
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi import topology

_LABEL_BITS = 20  # labels are Cartesian slots or repeat counts of one edge: far below 2**20
_PHASE_SIZES, _PHASE_DATA = 0, 1
_calls: "weakref.WeakKeyDictionary[object, itertools.count]" = weakref.WeakKeyDictionary()


def _edges(comm) -> tuple[list[int], list[int], list[int], list[int]]:
    """(sources, destinations, their labels) of this rank."""
    sources, destinations = topology.edges(comm)
    in_labels, out_labels = topology.shape_of(comm).labels(comm._g.rank)
    return sources, destinations, in_labels, out_labels


def _next_call(g) -> int:
    counter = _calls.get(g)
    if counter is None:
        counter = _calls.setdefault(g, itertools.count())
    return next(counter)


def _trade(g, call: int, phase: int, edges, outgoing: list[np.ndarray], incoming: list[np.ndarray]) -> None:
    """Send outgoing[j] to destination j and receive incoming[i] from source i (as bytes), then wait for all."""
    sources, destinations, in_labels, out_labels = edges
    base = ((call << 1) | phase) << _LABEL_BITS
    works = [g.irecv(peer, memoryview(block.view(np.uint8)), base | label)
             for peer, block, label in zip(sources, incoming, in_labels) if peer != C.PROC_NULL]
    works += [g.isend(peer, memoryview(np.ascontiguousarray(block).view(np.uint8)), base | label)
              for peer, block, label in zip(destinations, outgoing, out_labels) if peer != C.PROC_NULL]
    try:
        for work in works:
            work.wait()
    except MessageSizeError as exc:  # the two ends of an edge disagree on its block's size
        raise err.Exception(err.ERR_TRUNCATE, str(exc)) from None


def _blocks(spec, name: str, count: int, writable: bool) -> list[np.ndarray]:
    """The per-neighbour pieces of a buffer (equal pieces, or the counts and displacements it gives)."""
    if count == 0:
        msg.read_spec(spec, name, writable)
        return []
    vector = msg.read_vector(spec, name, count, writable)
    return [vector.piece(j) for j in range(count)]


def _no_in_place(*buffers) -> None:
    if any(b is msg.IN_PLACE for b in buffers):
        raise err.Exception(err.ERR_ARG, "neighbourhood collectives do not take MPI.IN_PLACE")


def _Neighbor_allgather(self, sendbuf, recvbuf) -> None:
    """Send the one block to every destination; block i of recvbuf comes from source i."""
    _no_in_place(sendbuf, recvbuf)
    edges = _edges(self)
    send = msg.read_spec(sendbuf, "sendbuf").array
    received = _blocks(recvbuf, "recvbuf", len(edges[0]), writable=True)
    g = self._g
    _trade(g, _next_call(g), _PHASE_DATA, edges, [send] * len(edges[1]), received)


def _Neighbor_alltoall(self, sendbuf, recvbuf) -> None:
    """Block j of sendbuf goes to destination j; block i of recvbuf comes from source i."""
    _no_in_place(sendbuf, recvbuf)
    edges = _edges(self)
    sent = _blocks(sendbuf, "sendbuf", len(edges[1]), writable=False)
    received = _blocks(recvbuf, "recvbuf", len(edges[0]), writable=True)
    g = self._g
    _trade(g, _next_call(g), _PHASE_DATA, edges, sent, received)


def _Neighbor_alltoallw(self, sendbuf, recvbuf) -> None:
    """Each block has its own count, datatype and byte displacement; blocks travel packed."""
    _no_in_place(sendbuf, recvbuf)
    edges = _edges(self)
    send = msg.read_w(sendbuf, "sendbuf", len(edges[1]))
    recv = msg.read_w(recvbuf, "recvbuf", len(edges[0]), writable=True)
    received = [np.empty(recv.nbytes(i), dtype=np.uint8) for i in range(len(edges[0]))]
    g = self._g
    _trade(g, _next_call(g), _PHASE_DATA, edges, [send.piece(j) for j in range(len(edges[1]))], received)
    for i, (peer, data) in enumerate(zip(edges[0], received)):
        if peer != C.PROC_NULL:
            recv.put(i, data)


def _neighbor_exchange(self, objs: list) -> list:
    """Pickled objects: their sizes first, so each receive knows how much comes."""
    g = self._g
    edges = _edges(self)
    call = _next_call(g)
    frames = [objects.dumps(obj) for obj in objs]
    sizes_out = [np.array([f.size], dtype=np.int64) for f in frames]
    sizes_in = [np.zeros(1, dtype=np.int64) for _ in edges[0]]
    _trade(g, call, _PHASE_SIZES, edges, sizes_out, sizes_in)
    received = [np.empty(int(n[0]), dtype=np.uint8) for n in sizes_in]
    _trade(g, call, _PHASE_DATA, edges, frames, received)
    return [None if peer == C.PROC_NULL else objects.loads(frame) for peer, frame in zip(edges[0], received)]


def _neighbor_allgather(self, sendobj) -> list:
    return _neighbor_exchange(self, [sendobj] * len(_edges(self)[1]))


def _neighbor_alltoall(self, sendobj) -> list:
    items = list(sendobj)
    outdegree = len(_edges(self)[1])
    if len(items) != outdegree:
        raise err.Exception(err.ERR_ARG, f"neighbor_alltoall needs one object per destination ({outdegree}), "
                                         f"got {len(items)}")
    return _neighbor_exchange(self, items)


_BUFFER_METHODS = {
    "Neighbor_allgather": _Neighbor_allgather, "Neighbor_allgatherv": _Neighbor_allgather,
    "Neighbor_alltoall": _Neighbor_alltoall, "Neighbor_alltoallv": _Neighbor_alltoall,
    "Neighbor_alltoallw": _Neighbor_alltoallw,
}
for _name, _method in _BUFFER_METHODS.items():
    setattr(topology.Topocomm, _name, collectives._in_lane(_name, _method))
    setattr(topology.Topocomm, f"I{_name[0].lower()}{_name[1:]}", collectives._started(_name, _method))
    setattr(topology.Topocomm, f"{_name}_init", collectives._persistent(_name, _method))
topology.Topocomm.neighbor_allgather = collectives._in_lane("neighbor_allgather", _neighbor_allgather)
topology.Topocomm.neighbor_alltoall = collectives._in_lane("neighbor_alltoall", _neighbor_alltoall)

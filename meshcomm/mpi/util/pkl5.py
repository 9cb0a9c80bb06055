"""mpi4py.util.pkl5 on meshcomm: objects pickled with protocol 5, their large buffers sent out of band, in pieces.

A lowercase send pickles its object with `pickle.dumps_oob`: a pickle
stream plus the big buffers (numpy arrays, ...) it refers to, uncopied. On
the wire that is one header message, then pieces:

    header   table (piece size, stream bytes, buffer count, each buffer's bytes) [+ the stream, if it fits one piece]
    pieces   the stream (when it did not fit), then each buffer, cut into pieces of at most `_bigmpi.blocksize`

all under the sender's tag. The receiver claims the header with a matched
probe, so no other receive can take it, then receives the pieces from the
header's source and tag, which arrive after it in order (MPI's
non-overtaking rule). No single message is larger than a piece, which is
how objects over 2 GiB get through. Collectives (bcast, gather, scatter,
allgather, alltoall) are built from these sends on a duplicate of the
communicator, so their messages never meet the program's own.
"""

from __future__ import annotations

import struct
import weakref

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.comm import Comm as _MPIComm, Intracomm as _MPIIntracomm, Pickle
from meshcomm.mpi.intercomm import Intercomm as _MPIIntercomm
from meshcomm.mpi.matched import MESSAGE_NULL, Message as _MPIMessage
from meshcomm.mpi.request import REQUEST_NULL, Request as _MPIRequest
from meshcomm.mpi.status import Status

__all__ = ["Comm", "Intercomm", "Intracomm", "Message", "Pickle", "Request", "pickle"]

ANY_SOURCE, ANY_TAG, PROC_NULL, ROOT = C.ANY_SOURCE, C.ANY_TAG, C.PROC_NULL, C.ROOT

_WORD = struct.Struct("!Q")
_TABLE_HEAD = struct.Struct("!QQQ")  # piece size, stream bytes, buffer count
_COLLECTIVE_TAG = 0  # the collectives' own communicator carries nothing else

pickle = Pickle()


class _BigMPI:
    """How big one message may be: larger streams and buffers go as several pieces."""

    def __init__(self, blocksize: int = 1 << 30) -> None:
        self.blocksize = blocksize


_bigmpi = _BigMPI()


def _pieces(nbytes: int, blocksize: int) -> list[tuple[int, int]]:
    return [(start, min(start + blocksize, nbytes)) for start in range(0, nbytes, blocksize)]


# ----- requests and messages


class Request:
    """A pkl5 operation: the MPI requests of its header and pieces, completed together (not an MPI.Request)."""

    def __init__(self, request=None, finish=None, status: Status | None = None) -> None:
        if isinstance(request, Request):
            self._parts, self._finish, self._status = list(request._parts), request._finish, request._status
            return
        if request is None:
            request = [REQUEST_NULL]
        elif isinstance(request, _MPIRequest):
            request = [request]
        self._parts = list(request)
        self._finish = finish  # () -> the received object, once every part has completed
        self._status = status  # a receive's status (its header's); None: the parts' own

    def _done(self, status: Status | None):
        if status is not None and self._status is not None:
            status._copy_from(self._status)
        finish, self._finish, self._status = self._finish, None, None
        return None if finish is None else finish()

    def __bool__(self) -> bool:
        return any(self._parts)

    def __eq__(self, other):
        if isinstance(other, Request):
            return self._parts == other._parts
        if isinstance(other, _MPIRequest):
            return self._parts[0] == other
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def Free(self) -> None:
        for part in self._parts:
            part.free()  # parts already completed are null, and MPI's Free refuses those
        self._finish = self._status = None

    free = Free

    def cancel(self) -> None:
        for part in filter(None, self._parts):  # parts already completed are null, and Cancel refuses those
            part.Cancel()

    def get_status(self, status: Status | None = None) -> bool:
        if not all([part.Get_status() for part in self._parts]):
            return False
        if status is not None:
            if self._status is not None:
                status._copy_from(self._status)
            else:
                self._parts[0].Get_status(status)
        return True

    def test(self, status: Status | None = None):
        if not all([part.Test() for part in self._parts]):  # a list: every part is moved
            return False, None
        return True, self.wait(status)

    def wait(self, status: Status | None = None):
        _MPIRequest.Waitall(self._parts[1:])
        self._parts[0].Wait(status)
        return self._done(status)

    @classmethod
    def get_status_all(cls, requests, statuses=None) -> bool:
        if not all([request.get_status() for request in requests]):
            return False
        for index, status in _statuses_for(requests, statuses):
            requests[index].get_status(status)
        return True

    @classmethod
    def testall(cls, requests, statuses=None):
        if not all([all([part.Test() for part in request._parts]) for request in requests]):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def waitall(cls, requests, statuses=None) -> list:
        given = dict(_statuses_for(requests, statuses))
        return [request.wait(given.get(index)) for index, request in enumerate(requests)]


def _statuses_for(requests, statuses):
    """(index, status) pairs: a list of statuses grows to one per request, other sequences fill what they have."""
    if statuses is None:
        return []
    if isinstance(statuses, list):
        while len(statuses) < len(requests):
            statuses.append(Status())
    return list(enumerate(statuses[: len(requests)]))


class Message:
    """A pkl5 message claimed by a matched probe: its header, whose pieces follow."""

    def __init__(self, message=None, status: Status | None = None) -> None:
        self._comm = getattr(message, "_comm", None)  # where the pieces come from (set by the probe)
        if isinstance(message, Message):
            message, status = message._message, message._status
        self._message = _MPIMessage(message)
        self._status = Status(status) if status is not None else Status()

    def __bool__(self) -> bool:
        return bool(self._message)

    def __eq__(self, other):
        if isinstance(other, Message):
            return self._message == other._message
        if isinstance(other, _MPIMessage):
            return self._message == other
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def free(self) -> None:
        self._message = _MPIMessage(MESSAGE_NULL)

    def irecv(self) -> Request:
        """Receive the header now (it has arrived) and post the pieces' receives; wait() returns the object."""
        header, status = self._take()
        if header is None:
            return Request(_MPIRequest.completed(None, PROC_NULL), lambda: None, status)
        table, stream = _parse_header(header)
        parts, finish = _receive_pieces(self._comm, status.source, status.tag, table, stream)
        return Request([_MPIRequest.completed()] + parts, finish, status)

    def recv(self, status: Status | None = None):
        return self.irecv().wait(status)

    def _take(self) -> tuple[bytearray | None, Status]:
        if not self._message:
            raise err.Exception(err.ERR_REQUEST, "this is MESSAGE_NULL: a message can be received only once")
        status = Status(self._status)
        header = bytearray(status.Get_count())
        self._message.Recv(header, status)
        self._message = _MPIMessage(MESSAGE_NULL)
        if status.source == PROC_NULL:
            return None, status
        return header, status

    @classmethod
    def probe(cls, comm, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> "Message":
        return _mprobe(comm, source, tag, status)

    @classmethod
    def iprobe(cls, comm, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> "Message | None":
        return _improbe(comm, source, tag, status)


# ----- the wire format


def _header(data: bytes, buffers: list, blocksize: int) -> tuple[bytearray, list[memoryview]]:
    """The header message and the pieces that follow it."""
    blocksize = max(1, int(blocksize))
    header = bytearray(_TABLE_HEAD.pack(blocksize, len(data), len(buffers)))
    flats = [memoryview(buffer).cast("B") for buffer in buffers]
    for flat in flats:
        header += _WORD.pack(flat.nbytes)
    pieces: list[memoryview] = []
    if len(data) <= blocksize:
        header += data
    else:
        flats.insert(0, memoryview(data))
    for flat in flats:
        pieces += [flat[a:b] for a, b in _pieces(flat.nbytes, blocksize)]
    return header, pieces


def _parse_header(header: bytearray) -> tuple[tuple[int, int, list[int]], memoryview | None]:
    blocksize, stream_bytes, count = _TABLE_HEAD.unpack_from(header)
    offset = _TABLE_HEAD.size
    sizes = [_WORD.unpack_from(header, offset + i * _WORD.size)[0] for i in range(count)]
    offset += count * _WORD.size
    stream = memoryview(header)[offset:] if stream_bytes <= blocksize else None
    return (blocksize, stream_bytes, sizes), stream


def _receive_pieces(comm, source: int, tag: int, table, stream):
    """Post a receive for every piece the header announces; (requests, a function unpickling once they are done)."""
    blocksize, stream_bytes, sizes = table
    targets = [] if stream is not None else [np.empty(stream_bytes, dtype=np.uint8)]
    buffers = [np.empty(size, dtype=np.uint8) for size in sizes]
    targets += buffers
    parts = [comm.Irecv(target[a:b], source, tag) for target in targets for a, b in _pieces(target.size, blocksize)]

    def finish():
        data = stream if stream is not None else targets[0]
        return pickle.loads_oob(data, [memoryview(b) for b in buffers])

    return parts, finish


def _isend(comm, obj, dest: int, tag: int, synchronous: bool) -> Request:
    if dest == PROC_NULL:
        return Request(_MPIRequest.completed())
    data, buffers = pickle.dumps_oob(obj)
    header, pieces = _header(data, buffers, _bigmpi.blocksize)
    first = (comm.Issend if synchronous else comm.Isend)(header, dest, tag)
    return Request([first] + [comm.Isend(piece, dest, tag) for piece in pieces])


def _matched(comm, source, tag, status, block: bool) -> Message | None:
    probe_status = Status()
    found = (comm.Mprobe if block else comm.Improbe)(source, tag, probe_status)
    if found is None:
        return None
    if status is not None:
        status._copy_from(probe_status)
    message = Message(found, probe_status)
    message._comm = comm
    return message


def _mprobe(comm, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> Message:
    return _matched(comm, source, tag, status, block=True)


def _improbe(comm, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> Message | None:
    return _matched(comm, source, tag, status, block=False)


# ----- communicators

_collective_comms: "weakref.WeakKeyDictionary[object, _MPIComm]" = weakref.WeakKeyDictionary()


class Comm(_MPIComm):
    """A communicator whose lowercase calls use pickle protocol 5 with out-of-band buffers."""

    def _wrap(self, made):
        return made if not made else type(self)(made)

    def Dup(self, info=None):
        return self._wrap(super().Dup(info))

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0):
        return self._wrap(super().Split(color, key))

    def Free(self) -> None:
        spare = _collective_comms.pop(self._resolve(), None)  # the collectives' duplicate goes with it
        if spare is not None:
            spare.Free()
        super().Free()

    # ----- point-to-point

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        return _isend(self, obj, dest, tag, False)

    ibsend = isend

    def issend(self, obj, dest: int, tag: int = 0) -> Request:
        return _isend(self, obj, dest, tag, True)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self.isend(obj, dest, tag).wait()

    bsend = send

    def ssend(self, obj, dest: int, tag: int = 0) -> None:
        self.issend(obj, dest, tag).wait()

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        return _mprobe(self, source, tag).recv(status)

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG):
        raise RuntimeError("pkl5 has no irecv: a receive posted before the header arrives could take another "
                           "message's pieces; use mprobe(...).irecv()")

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None, source: int = ANY_SOURCE,
                 recvtag: int = ANY_TAG, status: Status | None = None):
        send = self.isend(sendobj, dest, sendtag)
        try:
            return self.recv(None, source, recvtag, status)
        finally:
            send.wait()

    def mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> Message:
        return _mprobe(self, source, tag, status)

    def improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None):
        return _improbe(self, source, tag, status)

    # ----- collectives, from sends and receives on a duplicate of the communicator

    def _collective_comm(self) -> _MPIComm:
        """The duplicate the collectives talk on; every member makes it at its first collective (Dup is collective)."""
        key = self._resolve()
        found = _collective_comms.get(key)
        if found is None:
            found = _collective_comms[key] = super(Comm, self).Dup()
        return found

    def _inter(self) -> bool:
        return bool(self.Is_inter())

    def _check_root(self, root) -> int:
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
            raise TypeError(f"root must be an int, got {type(root).__name__}")
        if self._inter():
            if root in (ROOT, PROC_NULL) or 0 <= root < self.Get_remote_size():
                return int(root)
            raise err.Exception(err.ERR_ROOT, f"root must be MPI.ROOT, MPI.PROC_NULL or a remote rank in "
                                              f"[0, {self.Get_remote_size()}), got {root}")
        if 0 <= root < self.Get_size():
            return int(root)
        raise err.Exception(err.ERR_ROOT, f"root must be a rank in [0, {self.Get_size()}), got {root}")

    def _peers(self) -> int:
        return self.Get_remote_size() if self._inter() else self.Get_size()

    def _items(self, objs, what: str) -> list:
        peers = self._peers()
        items = list(objs) if objs is not None else [None] * peers
        if len(items) != peers:
            raise ValueError(f"{what} needs one object per {'remote ' if self._inter() else ''}rank "
                             f"({peers}), got {len(items)}")
        return items

    def _send_all(self, comm, items: dict[int, object]) -> None:
        Request.waitall([_isend(comm, obj, peer, _COLLECTIVE_TAG, False) for peer, obj in items.items()])

    def bcast(self, obj, root: int = 0):
        root = self._check_root(root)
        comm = self._collective_comm()
        if self._inter():
            if root == ROOT:
                self._send_all(comm, {peer: obj for peer in range(self._peers())})
            return None if root in (ROOT, PROC_NULL) else _mprobe(comm, root, _COLLECTIVE_TAG).recv()
        if self.Get_rank() == root:
            self._send_all(comm, {peer: obj for peer in range(self.Get_size()) if peer != root})
            return obj
        return _mprobe(comm, root, _COLLECTIVE_TAG).recv()

    def gather(self, sendobj, root: int = 0):
        root = self._check_root(root)
        comm = self._collective_comm()
        if self._inter():
            if root == ROOT:
                return [_mprobe(comm, peer, _COLLECTIVE_TAG).recv() for peer in range(self._peers())]
            if root != PROC_NULL:
                self._send_all(comm, {root: sendobj})
            return None
        if self.Get_rank() != root:
            self._send_all(comm, {root: sendobj})
            return None
        return [sendobj if peer == root else _mprobe(comm, peer, _COLLECTIVE_TAG).recv()
                for peer in range(self.Get_size())]

    def scatter(self, sendobj, root: int = 0):
        root = self._check_root(root)
        comm = self._collective_comm()
        if self._inter():
            if root == ROOT:
                self._send_all(comm, dict(enumerate(self._items(sendobj, "scatter"))))
            return None if root in (ROOT, PROC_NULL) else _mprobe(comm, root, _COLLECTIVE_TAG).recv()
        if self.Get_rank() == root:
            items = self._items(sendobj, "scatter")
            self._send_all(comm, {peer: items[peer] for peer in range(self.Get_size()) if peer != root})
            return items[root]
        return _mprobe(comm, root, _COLLECTIVE_TAG).recv()

    def _exchange(self, items: list) -> list:
        """Send items[peer] to every peer (but oneself) and receive one object from each."""
        comm = self._collective_comm()
        me = None if self._inter() else self.Get_rank()
        sends = [_isend(comm, obj, peer, _COLLECTIVE_TAG, False) for peer, obj in enumerate(items) if peer != me]
        received = [items[peer] if peer == me else _mprobe(comm, peer, _COLLECTIVE_TAG).recv()
                    for peer in range(len(items))]
        Request.waitall(sends)
        return received

    def allgather(self, sendobj) -> list:
        return self._exchange([sendobj] * self._peers())

    def alltoall(self, sendobj) -> list:
        return self._exchange(self._items(sendobj, "alltoall"))


class Intracomm(Comm, _MPIIntracomm):
    """pkl5's intracommunicator."""


class Intercomm(Comm, _MPIIntercomm):
    """pkl5's intercommunicator: roots are MPI.ROOT / PROC_NULL on the root's side, remote ranks on the other."""

"""Communicators: identity, creation (Dup, Split), and point-to-point calls.

Lowercase methods move pickled Python objects, Capitalized ones move
buffers described by message specifications (messages.py); both go through
the group's mailbox, which does MPI's matching (any source, any tag, probe).
Collectives live in collectives.py and are mixed into Intracomm.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np

from meshcomm.api import collectives as coll
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi import messages as msg
from meshcomm.mpi import status as st
from meshcomm.mpi.buffer import buffer
from meshcomm.mpi.handles import BuiltInNew
from meshcomm.mpi.request import Operation, Prequest, Request


class Pickle:
    """How lowercase calls turn objects into bytes (MPI.pickle); an empty message unpickles to None."""

    def __init__(self, dumps=None, loads=None, protocol: int | None = None) -> None:
        """None for dumps and loads means pickle's; pickle's dumps without a protocol uses the highest."""
        if protocol is None and dumps in (None, pickle.dumps):
            protocol = pickle.HIGHEST_PROTOCOL
        self._dumps, self._loads = dumps or pickle.dumps, loads or pickle.loads
        self.PROTOCOL = protocol

    def dumps(self, obj) -> bytes:
        """A serializer given no protocol (json's, say) is called with the object alone."""
        return self._dumps(obj) if self.PROTOCOL is None else self._dumps(obj, self.PROTOCOL)

    def loads(self, data):
        return None if len(data) == 0 else self._loads(data)

    _DEFAULT_THRESHOLD = 256 * 1024
    _threshold = _DEFAULT_THRESHOLD

    @property
    def THRESHOLD(self) -> int:
        """Buffers of at least this many bytes travel out of band in dumps_oob (None sets the default)."""
        return self._threshold

    @THRESHOLD.setter
    def THRESHOLD(self, value: int | None) -> None:
        self._threshold = self._DEFAULT_THRESHOLD if value is None else int(value)

    def dumps_oob(self, obj) -> tuple[bytes, list[buffer]]:
        """Pickle with protocol 5 (at least): the pickle stream, and the large buffers it refers to, uncopied."""
        protocol = self.PROTOCOL
        if protocol is None or protocol < 0:
            protocol = pickle.HIGHEST_PROTOCOL
        buffers: list[buffer] = []

        def out_of_band(pickled: pickle.PickleBuffer) -> bool:
            view = pickled.raw()
            if view.nbytes < self._threshold:
                return True  # small: kept in the stream
            buffers.append(buffer(view))
            return False

        return pickle.dumps(obj, max(protocol, 5), buffer_callback=out_of_band), buffers

    def loads_oob(self, data, buffers):
        return pickle.loads(data, buffers=buffers)


pickle_codec = Pickle()


class Comm(BuiltInNew):
    """A communicator: a meshcomm Group with MPI's calling conventions; COMM_NULL when it has none."""

    def _build(self, comm: "Comm | None" = None) -> None:
        if comm is not None and not isinstance(comm, Comm):
            raise TypeError(f"{type(self).__name__}() takes a communicator to share, got {type(comm).__name__}")
        self._group = None if comm is None else comm._resolve()
        self._resolver = None
        self._predefined = False
        self._name = ""

    @classmethod
    def _lazy(cls, resolver, name: str) -> "Comm":
        comm = cls()
        comm._resolver, comm._predefined, comm._name = resolver, True, name
        return comm

    @classmethod
    def _of(cls, group, name: str = "") -> "Comm":
        comm = cls()
        comm._group, comm._name = group, name
        return comm

    def _resolve(self):
        """The Group, or None for COMM_NULL; predefined communicators ask their resolver each time."""
        if self._resolver is not None:
            return self._resolver()
        return self._group

    @property
    def _g(self):
        group = self._resolve()
        if group is None:
            raise err.Exception(err.ERR_COMM, "this is COMM_NULL (or a freed communicator)")
        return group

    @property
    def _live(self):
        """_g, for a call that communicates: a revoked communicator raises ERR_REVOKED (ulfm.py)."""
        group = self._g
        revoked = group.runtime.transport.revoked_groups
        if revoked and group.group_id in revoked:
            raise err.Exception(err.ERR_REVOKED, f"communicator {self.Get_name()} was revoked")
        return group

    # ----- identity

    def Get_size(self) -> int:
        return self._g.size

    def Get_rank(self) -> int:
        return self._g.rank

    size = property(Get_size)
    rank = property(Get_rank)

    def Get_name(self) -> str:
        return self._name or f"comm{self._g.group_id}"

    def Set_name(self, name: str) -> None:
        if self._resolve() is None:
            raise err.Exception(err.ERR_COMM, "COMM_NULL has no name to set")
        self._name = str(name)

    name = property(Get_name, Set_name)

    def Is_inter(self) -> bool:
        return hasattr(self._g, "remote_ranks")  # an intercommunicator's group (intercomm.py) names the other side

    def Is_intra(self) -> bool:
        return not self.Is_inter()

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    @staticmethod
    def Compare(comm1: "Comm", comm2: "Comm") -> int:
        g1, g2 = comm1._g, comm2._g
        if g1 is g2:
            return C.IDENT
        remote1, remote2 = getattr(g1, "remote_ranks", None), getattr(g2, "remote_ranks", None)
        if (remote1 is None) != (remote2 is None):
            return C.UNEQUAL  # an intercommunicator and an intracommunicator
        if g1.ranks == g2.ranks and remote1 == remote2:
            return C.CONGRUENT
        if sorted(g1.ranks) == sorted(g2.ranks) and sorted(remote1 or ()) == sorted(remote2 or ()):
            return C.SIMILAR
        return C.UNEQUAL

    def __eq__(self, other) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        return self._resolve() is other._resolve()

    def __ne__(self, other) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return id(self._resolve())

    def __bool__(self) -> bool:
        return self._resolve() is not None

    def __reduce__(self):
        """COMM_NULL, COMM_SELF and COMM_WORLD pickle as themselves, copies of them as copies; others cannot."""
        for name in _PICKLED_CONSTANTS:
            constant = _constant(name)
            if self is constant:
                return _constant, (name,)
            if self == constant:
                return type(self), (constant,)
        raise ValueError(f"cannot pickle {self!r}: a communicator names processes of this job only")

    def __repr__(self) -> str:
        group = self._group
        return f"<meshcomm.MPI.{type(self).__name__} {self._name or (group.group_name if group else 'COMM_NULL')}>"

    # ----- creation and destruction

    def Free(self) -> None:
        """Release the communicator; it compares equal to COMM_NULL afterwards."""
        if self._predefined:
            raise err.Exception(err.ERR_COMM, f"cannot free the predefined communicator {self._name}")
        g = self._g
        lane.close(g)
        g.shutdown()
        self._group = None

    def Disconnect(self) -> None:
        """Free, after every pending operation on it completes (MPI_Comm_disconnect); COMM_NULL: ERR_COMM."""
        g = self._g
        lane.lane(g).run(lambda: None)  # the started collectives ahead of it finish first
        self.Free()

    def Dup(self, info=None) -> "Comm":
        """A new communicator of this one's class over the same ranks, whose messages never meet this one's."""
        return type(self)._of(self._split_by(0, self._g.rank)._resolve())

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> "Intracomm":
        """Ranks with equal colour form a communicator, ordered by (key, old rank); UNDEFINED: COMM_NULL."""
        for value, name in ((color, "color"), (key, "key")):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if color < 0 and color != C.UNDEFINED:
            raise err.Exception(err.ERR_ARG, f"color must be >= 0 or MPI.UNDEFINED, got {color}")
        return self._split_by(-1 if color == C.UNDEFINED else int(color), int(key))

    def _split_by(self, color: int, key: int) -> "Intracomm":
        """Every member calls this; they agree on fresh group ids (the highest any of them has free)."""
        g = self._g
        return lane.lane(g).run(lambda: self._split_now(g, color, key))

    def _split_now(self, g, color: int, key: int) -> "Intracomm":
        rt = g.runtime
        mine = np.array([color, key, rt.unused_group_id()], dtype=np.int64)
        table = np.empty(3 * g.size, dtype=np.int64)
        coll.all_gather_into_tensor(table, mine, group=g)
        rows = table.reshape(g.size, 3)
        base = int(rows[:, 2].max())
        colors = sorted({int(c) for c in rows[:, 0] if c >= 0})
        if colors:
            rt.reserve_group_id(base + len(colors) - 1)
        if color < 0:
            return Intracomm()
        members = sorted((int(rows[r, 1]), r) for r in range(g.size) if rows[r, 0] == color)
        ranks = tuple(g.ranks[r] for _, r in members)
        group_id = base + colors.index(color)
        return Intracomm._of(rt.new_group(ranks, g.timeout, f"{g.group_name}/{color}", group_id=group_id))

    # ----- point-to-point helpers

    def _peer(self, rank, role: str, allow_any: bool = False) -> int | None:
        """A group rank, PROC_NULL, or None for ANY_SOURCE; ERR_RANK otherwise."""
        g = self._live
        size = getattr(g, "remote_size", g.size)  # an intercommunicator's ranks name the other group's members
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
            raise TypeError(f"{role} must be an int rank, got {type(rank).__name__}")
        if rank == C.PROC_NULL:
            return C.PROC_NULL
        if allow_any and rank == C.ANY_SOURCE:
            return None
        if not 0 <= rank < size:
            raise err.Exception(err.ERR_RANK, f"{role} must be in [0, {size}) or PROC_NULL, got {rank}")
        return int(rank)

    @staticmethod
    def _tag(tag, allow_any: bool = False) -> int | None:
        if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)):
            raise TypeError(f"tag must be an int, got {type(tag).__name__}")
        if allow_any and tag == C.ANY_TAG:
            return None
        if not 0 <= tag <= C.TAG_UB:
            raise err.Exception(err.ERR_TAG, f"tag must be in [0, {C.TAG_UB}], got {tag}")
        return int(tag)

    def _post_send(self, payload, dest, tag, synchronous: bool) -> Request:
        peer, tag = self._peer(dest, "dest"), self._tag(tag)
        if peer == C.PROC_NULL:
            return Request.completed()
        mailbox = self._g.mailbox
        return Request(mailbox, mailbox.send(peer, tag, payload, synchronous))

    def _post_recv(self, source, tag, finish) -> Request:
        peer, tag = self._peer(source, "source", allow_any=True), self._tag(tag, allow_any=True)
        if peer == C.PROC_NULL:
            return Request.completed(finish(None), C.PROC_NULL)
        mailbox = self._g.mailbox
        return Request(mailbox, mailbox.recv(peer, tag), finish)

    # ----- objects

    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        return self._post_send(pickle_codec.dumps(obj), dest, tag, False)

    ibsend = isend

    def issend(self, obj, dest: int, tag: int = 0) -> Request:
        """Completes only once the receiver has matched the message."""
        return self._post_send(pickle_codec.dumps(obj), dest, tag, True)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        self.isend(obj, dest, tag).wait()

    bsend = send

    def ssend(self, obj, dest: int, tag: int = 0) -> None:
        self.issend(obj, dest, tag).wait()

    def irecv(self, buf=None, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG) -> Request:
        """Receive an object; `buf` is accepted for compatibility, objects get a buffer of their own size."""
        return self._post_recv(source, tag, _unpickle)

    def recv(self, buf=None, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG, status: st.Status | None = None):
        if buf is not None:
            warnings.warn("the buf argument of recv() is not used: objects are received into a buffer "
                          "of their own size", UserWarning, stacklevel=2)
        return self.irecv(None, source, tag).wait(status)

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None, source: int = C.ANY_SOURCE,
                 recvtag: int = C.ANY_TAG, status: st.Status | None = None):
        receive = self.irecv(None, source, recvtag)
        send = self.isend(sendobj, dest, sendtag)
        result = receive.wait(status)
        send.wait()
        return result

    def probe(self, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG, status: st.Status | None = None) -> bool:
        """Wait until a message matching (source, tag) has arrived, without receiving it."""
        peer, tag = self._peer(source, "source", allow_any=True), self._tag(tag, allow_any=True)
        if peer == C.PROC_NULL:
            st.empty(status)
            return True
        mailbox = self._g.mailbox
        found = []
        mailbox.wait(lambda: found.append(mailbox.probe(peer, tag)) or found[-1] is not None, "probe")
        if status is not None:
            status._set(found[-1].source, found[-1].tag, len(found[-1].payload))
        return True

    def iprobe(self, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG, status: st.Status | None = None) -> bool:
        peer, tag = self._peer(source, "source", allow_any=True), self._tag(tag, allow_any=True)
        if peer == C.PROC_NULL:
            st.empty(status)
            return True
        mailbox = self._g.mailbox
        mailbox.progress(0)
        message = mailbox.probe(peer, tag)
        if message is not None and status is not None:
            status._set(message.source, message.tag, len(message.payload))
        return message is not None

    Probe, Iprobe = probe, iprobe

    # ----- buffers

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._post_send(_payload(buf), dest, tag, False)

    Ibsend = Irsend = Isend

    def Issend(self, buf, dest: int, tag: int = 0) -> Request:
        return self._post_send(_payload(buf), dest, tag, True)

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self.Isend(buf, dest, tag).Wait()

    Bsend = Rsend = Send

    def Ssend(self, buf, dest: int, tag: int = 0) -> None:
        self.Issend(buf, dest, tag).Wait()

    def Irecv(self, buf, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG) -> Request:
        target = msg.read_spec(buf, "buf", writable=True).array.view(np.uint8)
        return self._post_recv(source, tag, lambda message: _copy_into(target, message))

    def Recv(self, buf, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG, status: st.Status | None = None) -> None:
        self.Irecv(buf, source, tag).Wait(status)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = C.ANY_SOURCE,
                 recvtag: int = C.ANY_TAG, status: st.Status | None = None) -> None:
        # Both buffers are read before either message is posted: a bad one leaves no receive behind.
        self.Isendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag).Wait(status)

    def Sendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = C.ANY_SOURCE,
                         recvtag: int = C.ANY_TAG, status: st.Status | None = None) -> None:
        self.Isendrecv_replace(buf, dest, sendtag, source, recvtag).Wait(status)

    def Isendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = C.ANY_SOURCE,
                  recvtag: int = C.ANY_TAG) -> Request:
        """One request for a send and a receive; it completes when both have, with the receive's status."""
        target = msg.read_spec(recvbuf, "recvbuf", writable=True).array.view(np.uint8)
        return self._post_both(_payload(sendbuf), dest, sendtag, source, recvtag,
                               lambda message: _copy_into(target, message))

    def Isendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = C.ANY_SOURCE,
                          recvtag: int = C.ANY_TAG) -> Request:
        """Send `buf`, then receive into it: the send takes its copy of the bytes before the receive is posted."""
        target = msg.read_spec(buf, "buf", writable=True).array.view(np.uint8)
        return self._post_both(memoryview(target), dest, sendtag, source, recvtag,
                               lambda message: _copy_into(target, message))

    def isendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None, source: int = C.ANY_SOURCE,
                  recvtag: int = C.ANY_TAG) -> Request:
        return self._post_both(pickle_codec.dumps(sendobj), dest, sendtag, source, recvtag, _unpickle)

    def _post_both(self, payload, dest, sendtag, source, recvtag, finish) -> Request:
        peer, sendtag = self._peer(dest, "dest"), self._tag(sendtag)
        origin, recvtag = self._peer(source, "source", allow_any=True), self._tag(recvtag, allow_any=True)
        mailbox = self._g.mailbox
        send = None if peer == C.PROC_NULL else mailbox.send(peer, sendtag, payload, False)
        receive = None if origin == C.PROC_NULL else mailbox.recv(origin, recvtag)
        both = _SendAndReceive(send, receive)
        return Request._naming(Operation(mailbox, both, finish, C.PROC_NULL if receive is None else C.ANY_SOURCE))

    # ----- persistent requests: the message specification is read now, the buffer's bytes at each Start

    def _send_init(self, buf, dest, tag, synchronous: bool) -> Prequest:
        payload, peer, tag = _payload(buf), self._peer(dest, "dest"), self._tag(tag)
        mailbox = self._g.mailbox
        if peer == C.PROC_NULL:
            return Prequest(mailbox, lambda: None)
        return Prequest(mailbox, lambda: mailbox.send(peer, tag, payload, synchronous))

    def Send_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        return self._send_init(buf, dest, tag, False)

    Bsend_init = Rsend_init = Send_init

    def Ssend_init(self, buf, dest: int, tag: int = 0) -> Prequest:
        """Each run completes only once the receiver has matched its message."""
        return self._send_init(buf, dest, tag, True)

    def Recv_init(self, buf, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG) -> Prequest:
        target = msg.read_spec(buf, "buf", writable=True).array.view(np.uint8)
        peer, tag = self._peer(source, "source", allow_any=True), self._tag(tag, allow_any=True)
        mailbox = self._g.mailbox

        def finish(message):
            return _copy_into(target, message)

        if peer == C.PROC_NULL:
            return Prequest(mailbox, lambda: None, finish, C.PROC_NULL)
        return Prequest(mailbox, lambda: mailbox.recv(peer, tag), finish)


_PICKLED_CONSTANTS = ("COMM_NULL", "COMM_SELF", "COMM_WORLD")


def _constant(name: str) -> Comm:
    import meshcomm.mpi as face

    return getattr(face, name)


class _SendAndReceive:
    """A send and a receive waited on as one (Isendrecv); either may be None (PROC_NULL), the receive's message counts."""

    def __init__(self, send, receive) -> None:
        self._parts = [part for part in (send, receive) if part is not None]
        self._receive = receive

    def is_completed(self) -> bool:
        return all([part.is_completed() for part in self._parts])  # a list: test every part, so each moves

    def wait(self) -> None:
        for part in self._parts:
            part.wait()

    def exception(self) -> BaseException | None:
        return next((part.exception() for part in self._parts if part.exception() is not None), None)

    @property
    def message(self):
        return None if self._receive is None else self._receive.message


def _payload(buf) -> memoryview:
    return memoryview(msg.read_spec(buf, "buf").array.view(np.uint8))


def _unpickle(message):
    return None if message is None else pickle_codec.loads(message.payload)


def _copy_into(target: np.ndarray, message) -> None:
    if message is None:
        return
    nbytes = len(message.payload)
    if nbytes > target.size:
        raise err.Exception(err.ERR_TRUNCATE, f"message of {nbytes} bytes from rank {message.source} "
                                              f"does not fit the receive buffer of {target.size} bytes")
    target[:nbytes] = np.frombuffer(message.payload, dtype=np.uint8)
    msg.written(target)


class Intracomm(Comm):
    """Filled in with the collectives by meshcomm.mpi.collectives."""

    def _build(self, comm: "Comm | None" = None) -> None:
        super()._build(comm)
        if self._group is not None and hasattr(self._group, "remote_ranks"):
            raise TypeError("expecting an intracommunicator, got an intercommunicator")

"""MPI.Message and matched probes (Mprobe, Improbe): a probe that also claims the message it finds.

A plain probe only looks, so a receive posted later (by another thread, say)
may take a different message. A matched probe takes its message out of the
mailbox's matching at once (`Mailbox.claim`), and the returned Message is
the only way to receive it: `Message.Recv` / `Irecv` for buffers, `recv` /
`irecv` for objects. Receiving through a Message makes it MESSAGE_NULL; a
probe of PROC_NULL returns MESSAGE_NO_PROC, whose receives get nothing.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi import status as st
from meshcomm.mpi.comm import Comm, _copy_into, _unpickle
from meshcomm.mpi.handles import BuiltInNew
from meshcomm.mpi.request import Operation, Request


class _NoProc:
    """What MESSAGE_NO_PROC names: the empty message a probe of PROC_NULL finds."""


_NO_PROC = _NoProc()


class _Held:
    """What a Message names: the mailbox and its receive holding the matched message (or _NO_PROC)."""

    def __init__(self, mailbox, claimed) -> None:
        self.mailbox, self.claimed = mailbox, claimed


class Message(BuiltInNew):
    """A matched message, waiting to be received; falsy when MESSAGE_NULL."""

    def _build(self, message: "Message | None" = None) -> None:
        if message is not None and not isinstance(message, Message):
            raise TypeError(f"Message() takes another Message to copy, got {type(message).__name__}")
        self._held: _Held | None = None if message is None else message._held

    @classmethod
    def _of(cls, mailbox, claimed) -> "Message":
        message = cls()
        message._held = _Held(mailbox, claimed)
        return message

    @property
    def _claimed(self):
        return None if self._held is None else self._held.claimed

    # ----- probing

    @classmethod
    def Probe(cls, comm: Comm, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG,
              status: st.Status | None = None) -> "Message":
        return _mprobe(comm, source, tag, status)

    @classmethod
    def Iprobe(cls, comm: Comm, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG,
               status: st.Status | None = None) -> "Message | None":
        return _improbe(comm, source, tag, status)

    probe, iprobe = Probe, Iprobe

    # ----- receiving

    def _take(self, finish) -> Request:
        """A request for the message (complete already: it has arrived); this Message becomes MESSAGE_NULL."""
        claimed = self._claimed
        if claimed is None:
            raise err.Exception(err.ERR_REQUEST, "this is MESSAGE_NULL: a message can be received only once")
        mailbox = self._held.mailbox
        if self is not MESSAGE_NO_PROC:
            self._held = None
        if claimed is _NO_PROC:
            return Request._naming(Operation(None, None, finish, C.PROC_NULL))
        return Request._naming(Operation(mailbox, claimed, finish))

    def Irecv(self, buf) -> Request:
        target = msg.read_spec(buf, "buf", writable=True).array.view(np.uint8)
        return self._take(lambda message: _copy_into(target, message))

    def Recv(self, buf, status: st.Status | None = None) -> None:
        self.Irecv(buf).Wait(status)

    def irecv(self) -> Request:
        return self._take(_unpickle)

    def recv(self, status: st.Status | None = None):
        return self.irecv().wait(status)

    # ----- identity (handle, fromhandle and free come from objmodel, as for the other classes)

    def __bool__(self) -> bool:
        return self._claimed is not None

    def __eq__(self, other) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._held is other._held

    def __hash__(self) -> int:
        return id(self._held)

    def __reduce__(self):
        if self is MESSAGE_NULL or self is MESSAGE_NO_PROC:
            return "MESSAGE_NULL" if self is MESSAGE_NULL else "MESSAGE_NO_PROC"
        if self._claimed is None:
            return type(self), ()
        if self._claimed is _NO_PROC:
            return type(self), (MESSAGE_NO_PROC,)
        raise ValueError("cannot pickle a matched message: it lives in the process that probed it")

    def __repr__(self) -> str:
        name = "MESSAGE_NULL" if self._claimed is None else "MESSAGE_NO_PROC" if self._claimed is _NO_PROC else ""
        return f"<meshcomm.MPI.Message {name or self.handle}>"


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message._of(None, _NO_PROC)


def _matched(comm: Comm, source, tag, status: st.Status | None, block: bool) -> Message | None:
    peer, tag = comm._peer(source, "source", allow_any=True), comm._tag(tag, allow_any=True)
    if peer == C.PROC_NULL:
        st.empty(status, C.PROC_NULL)
        return Message(MESSAGE_NO_PROC)  # a new object: receiving through it makes it MESSAGE_NULL
    mailbox = comm._g.mailbox
    found = []
    if block:
        mailbox.wait(lambda: found.append(mailbox.claim(peer, tag)) or found[-1] is not None, "matched probe")
    else:
        mailbox.progress(0)
        found.append(mailbox.claim(peer, tag))
    claimed = found[-1]
    if claimed is None:
        return None
    if status is not None:
        status._set(claimed.message.source, claimed.message.tag, len(claimed.message.payload))
    return Message._of(mailbox, claimed)


def _mprobe(self: Comm, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG,
            status: st.Status | None = None) -> Message:
    """Wait for a message matching (source, tag) and claim it: only the returned Message can receive it."""
    return _matched(self, source, tag, status, block=True)


def _improbe(self: Comm, source: int = C.ANY_SOURCE, tag: int = C.ANY_TAG,
             status: st.Status | None = None) -> Message | None:
    """Claim a message matching (source, tag) if one has arrived; None otherwise."""
    return _matched(self, source, tag, status, block=False)


for _name, _method in (("Mprobe", _mprobe), ("mprobe", _mprobe), ("Improbe", _improbe), ("improbe", _improbe)):
    setattr(Comm, _name, _method)

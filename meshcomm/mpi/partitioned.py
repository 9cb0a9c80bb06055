"""Partitioned point-to-point (MPI 4): Psend_init and Precv_init, with Pready and Parrived.

A partitioned request is persistent, and its buffer is cut into equal
partitions. After Start, the sender marks partitions ready (Pready, in any
order), and each leaves at once as a mailbox message of its own: its index,
the sender's partition count and its byte offset, then its bytes. These
messages carry a tag in the mailbox's private range, so only the matching
partitioned receive takes them, never an ordinary any-tag receive. The
receive, once started, takes them one after another from its source and
copies each into place; Parrived(j) says whether its partition j is all in.
A run is complete when every partition has been sent, or has arrived.
"""

from __future__ import annotations

import struct

import numpy as np

from meshcomm.group.mailbox import PRIVATE_TAG_BASE, Message
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi.comm import Comm
from meshcomm.mpi.request import Prequest

_PART = struct.Struct("!QQQ")  # partition index, the sender's partition count, byte offset


def _span(nbytes: int, partitions: int, index: int) -> tuple[int, int]:
    size = nbytes // partitions
    return index * size, (index + 1) * size


class _SendRun:
    """One run of a partitioned send: the partitions marked ready so far, each a mailbox send."""

    message = None

    def __init__(self, mailbox, peer: int | None, tag: int, payload: np.ndarray, partitions: int) -> None:
        self._mailbox, self._peer, self._tag = mailbox, peer, tag
        self._payload, self._partitions = payload, partitions
        self._sends: dict[int, object] = {}  # partition index -> its mailbox send (None to PROC_NULL)

    def ready(self, index: int) -> None:
        if index in self._sends:
            raise err.Exception(err.ERR_ARG, f"partition {index} is already marked ready in this run")
        if self._peer is None:
            self._sends[index] = None
            return
        lo, hi = _span(self._payload.size, self._partitions, index)
        frame = bytearray(_PART.pack(index, self._partitions, lo)) + self._payload[lo:hi].tobytes()
        self._sends[index] = self._mailbox.send(self._peer, self._tag, frame)

    def is_completed(self) -> bool:
        if len(self._sends) < self._partitions:
            return False
        return all([send is None or send.is_completed() for send in self._sends.values()])

    def wait(self) -> None:
        self._mailbox.wait(self.is_completed, f"partitioned send ({len(self._sends)} of {self._partitions} "
                                              f"partitions marked ready)")

    def exception(self) -> None:
        return None


class _ReceiveRun:
    """One run of a partitioned receive: the sender's partitions that have come in, copied into place."""

    def __init__(self, mailbox, peer: int | None, tag: int, user_tag: int, target: np.ndarray,
                 partitions: int) -> None:
        self._mailbox, self._peer, self._tag, self._user_tag = mailbox, peer, tag, user_tag
        self._target, self._partitions = target, partitions
        self._arrived: dict[int, tuple[int, int]] = {}  # sender's partition index -> (byte offset, bytes)
        self._sender_partitions: int | None = None
        self._error: BaseException | None = None
        self._pending = None if peer is None else mailbox.recv(peer, tag)

    def _take(self) -> None:
        """Copy in every partition that has arrived, and post the receive for the next."""
        while self._pending is not None and self._pending.is_completed():
            frame = self._pending.message.payload
            index, partitions, offset = _PART.unpack_from(frame)
            data = np.frombuffer(frame[_PART.size :], dtype=np.uint8)
            self._pending = None
            if offset + data.size > self._target.size:
                self._error = err.Exception(err.ERR_TRUNCATE, f"partition {index} ({data.size} bytes at offset "
                                                              f"{offset}) does not fit the receive buffer of "
                                                              f"{self._target.size} bytes")
                return
            self._target[offset : offset + data.size] = data
            self._arrived[index] = (offset, data.size)
            self._sender_partitions = partitions
            if len(self._arrived) < partitions:
                self._pending = self._mailbox.recv(self._peer, self._tag)

    def _all_in(self) -> bool:
        return self._peer is None or (self._sender_partitions is not None
                                      and len(self._arrived) == self._sender_partitions)

    def is_completed(self) -> bool:
        self._take()
        return self._error is not None or self._all_in()

    def arrived(self, index: int) -> bool:
        self._mailbox.progress(0)
        self._take()
        if self._all_in():
            return True
        if self._sender_partitions == self._partitions:
            return index in self._arrived
        lo, hi = _span(self._target.size, self._partitions, index)
        covered = sum(max(0, min(hi, o + n) - max(lo, o)) for o, n in self._arrived.values())
        return hi > lo and covered == hi - lo  # an empty partition arrives with the whole message

    def wait(self) -> None:
        self._mailbox.wait(self.is_completed, "partitioned receive")

    def exception(self) -> BaseException | None:
        return self._error

    @property
    def message(self) -> Message | None:
        if self._peer is None:
            return None
        return Message(self._peer, self._user_tag, memoryview(self._target))


def _partitions(partitions, elements: int) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, (int, np.integer)):
        raise TypeError(f"partitions must be an int, got {type(partitions).__name__}")
    if partitions < 1:
        raise err.Exception(err.ERR_ARG, f"partitions must be >= 1, got {partitions}")
    if elements % partitions:
        raise err.Exception(err.ERR_COUNT, f"the buffer's {elements} elements do not split into {partitions} "
                                           f"equal partitions")
    return int(partitions)


def _private(tag: int) -> int:
    return PRIVATE_TAG_BASE + tag


def _psend_init(self: Comm, buf, partitions: int, dest: int, tag: int = 0, info=None) -> Prequest:
    """A persistent send in `partitions` equal parts; after each Start, Pready sends a part."""
    spec = msg.read_spec(buf, "buf")
    partitions = _partitions(partitions, spec.array.size)
    payload = spec.array.view(np.uint8)
    peer, tag = self._peer(dest, "dest"), self._tag(tag)
    peer = None if peer == C.PROC_NULL else peer
    mailbox = self._g.mailbox
    request = Prequest(mailbox, lambda: _SendRun(mailbox, peer, _private(tag), payload, partitions))
    request._op.partitions = partitions
    return request


def _precv_init(self: Comm, buf, partitions: int, source: int, tag: int = 0, info=None) -> Prequest:
    """A persistent receive in `partitions` equal parts; Parrived says which have come in."""
    spec = msg.read_spec(buf, "buf", writable=True)
    partitions = _partitions(partitions, spec.array.size)
    target = spec.array.view(np.uint8)
    peer, tag = self._peer(source, "source"), self._tag(tag)
    null_source = C.PROC_NULL if peer == C.PROC_NULL else C.ANY_SOURCE
    peer = None if peer == C.PROC_NULL else peer
    mailbox = self._g.mailbox
    request = Prequest(mailbox, lambda: _ReceiveRun(mailbox, peer, _private(tag), tag, target, partitions),
                       null_source=null_source)
    request._op.partitions = partitions
    return request


def _run(request: Prequest, what: str, kind: type):
    op = request._op
    run = None if op is None else op.posted
    if not isinstance(run, kind):
        raise err.Exception(err.ERR_REQUEST, f"{what} needs a started partitioned "
                                             f"{'send' if kind is _SendRun else 'receive'} request")
    return run


def _partition(request: Prequest, index) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"partition must be an int, got {type(index).__name__}")
    if not 0 <= index < request._op.partitions:
        raise err.Exception(err.ERR_ARG, f"partition must be in [0, {request._op.partitions}), got {index}")
    return int(index)


def _pready(self: Prequest, partition: int) -> None:
    """Mark one partition ready: its bytes leave now."""
    _run(self, "Pready", _SendRun).ready(_partition(self, partition))


def _pready_range(self: Prequest, partition_low: int, partition_high: int) -> None:
    """Mark partitions partition_low..partition_high (both included) ready."""
    run = _run(self, "Pready_range", _SendRun)
    for index in range(_partition(self, partition_low), _partition(self, partition_high) + 1):
        run.ready(index)


def _pready_list(self: Prequest, partitions) -> None:
    run = _run(self, "Pready_list", _SendRun)
    for index in [_partition(self, p) for p in partitions]:
        run.ready(index)


def _parrived(self: Prequest, partition: int) -> bool:
    """Whether partition `partition` of a started receive has arrived."""
    return _run(self, "Parrived", _ReceiveRun).arrived(_partition(self, partition))


Comm.Psend_init, Comm.Precv_init = _psend_init, _precv_init
Prequest.Pready, Prequest.Pready_range, Prequest.Pready_list, Prequest.Parrived = (
    _pready, _pready_range, _pready_list, _parrived)

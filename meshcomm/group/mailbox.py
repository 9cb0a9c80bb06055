"""MPI-style point-to-point matching for one group: any source, any tag, probe, synchronous sends.

The transport matches a receive to a message by an exact key and needs the
message's size up front; MPI receives name a source or any, a tag or any,
and may not know the size (pickled objects, probe). So every message of a
group travels under one transport key with a small envelope (tag, sync id)
in front of the payload, the transport hands over whole messages as they
arrive (`Transport.take`), and matching happens here, in MPI's order:
a message goes to the earliest posted receive that accepts it, else waits
in arrival order for a later receive or probe. Messages from one sender
arrive in the order sent, so MPI's non-overtaking rule holds.

A synchronous send (ssend) asks for an acknowledgement, sent back under a
second key when its message is matched; the send completes only then.
"""

from __future__ import annotations

import itertools
import struct
import threading
import time
from dataclasses import dataclass

from meshcomm.errors import CommTimeoutError
from meshcomm.group.work import Work
from meshcomm.transport.header import KIND_MAILBOX, Key

_ENVELOPE = struct.Struct("!qQ")  # tag, sync id (0: no acknowledgement wanted)
_ACK = struct.Struct("!Q")
_DATA_CHANNEL, _ACK_CHANNEL = 0, 1
_POLL_SLICE = 0.05
# Tags from here up belong to traffic beside the program's own (MPI's partitioned messages): only a receive
# naming such a tag exactly takes it, never an any-tag receive or probe.
PRIVATE_TAG_BASE = 1 << 40


@dataclass
class Message:
    source: int  # rank within the group
    tag: int
    payload: memoryview
    sync_id: int = 0


class _Posted(Work):
    """A send or receive of the mailbox: a Work that waiting on (or testing) moves."""

    def __init__(self, mailbox: "Mailbox", description: str) -> None:
        super().__init__(description)
        self._mailbox = mailbox
        self._told = False  # whether the done callbacks ran
        self.error: Exception | None = None  # a receive from a rank that is gone fails with why

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def _settled(self) -> bool:
        return self.done

    def _mark_done(self) -> None:
        pass  # `done` is derived from the mailbox's state

    def _wait(self, timeout: float | None) -> bool:
        self._mailbox.wait(lambda: self.done, self.description, timeout)
        self._tell()
        if self.error is not None:
            raise self.error
        return True

    def is_completed(self) -> bool:
        if not self.done:
            self._mailbox.progress(0)
        if self.done:
            self._tell()
        return self.done

    def _tell(self) -> None:
        if not self._told:
            self._told = True
            self._finish(self.error)


class PostedRecv(_Posted):
    def __init__(self, mailbox: "Mailbox", source: int | None, tag: int | None) -> None:
        super().__init__(mailbox, f"receive from {'any rank' if source is None else f'rank {source}'}"
                                  f" ({'any tag' if tag is None else f'tag {tag}'})")
        self.source = source  # rank within the group; None: any source
        self.tag = tag  # None: any tag
        self.message: Message | None = None
        self.cancelled = False

    def accepts(self, message: Message) -> bool:
        if self.tag is None:
            tag_matches = message.tag < PRIVATE_TAG_BASE
        else:
            tag_matches = self.tag == message.tag
        return (self.source is None or self.source == message.source) and tag_matches

    @property
    def done(self) -> bool:
        return self.message is not None or self.cancelled or self.error is not None


class PostedSend(_Posted):
    def __init__(self, mailbox: "Mailbox", dest: int, tag: int, transport_handle, sync_id: int) -> None:
        super().__init__(mailbox, f"send to rank {dest} (tag {tag})")
        self.transport_handle = transport_handle
        self.sync_id = sync_id
        self.acknowledged = False

    @property
    def done(self) -> bool:
        return self.transport_handle.done and (self.sync_id == 0 or self.acknowledged)


class Mailbox:
    """Posted receives and arrived-but-unmatched messages of one group on this rank."""

    _sync_ids = itertools.count(1)

    def __init__(self, group) -> None:
        self.group = group
        self.transport = group.runtime.transport
        self._data_key = Key(KIND_MAILBOX, group.group_id, _DATA_CHANNEL, 0)
        self._ack_key = Key(KIND_MAILBOX, group.group_id, _ACK_CHANNEL, 0)
        self._posted: list[PostedRecv] = []
        self._arrived: list[Message] = []
        self._awaiting_ack: dict[int, PostedSend] = {}
        self._lock = threading.RLock()

    # ----- posting

    def send(self, dest: int, tag: int, payload, synchronous: bool = False) -> PostedSend:
        """Start sending `payload` (bytes-like) to group rank `dest`; the envelope is prepended here."""
        sync_id = next(self._sync_ids) if synchronous else 0
        frame = bytearray(_ENVELOPE.pack(tag, sync_id))
        frame += memoryview(payload).cast("B") if not isinstance(payload, (bytes, bytearray)) else payload
        with self._lock:
            handle = self.transport.isend(self.group.global_rank(dest), memoryview(frame), self._data_key)
            posted = PostedSend(self, dest, tag, handle, sync_id)
            if sync_id:
                self._awaiting_ack[sync_id] = posted
        self.progress(0)
        return posted

    def recv(self, source: int | None, tag: int | None) -> PostedRecv:
        """Post a receive; it takes the oldest arrived message it accepts, or waits for one."""
        posted = PostedRecv(self, source, tag)
        with self._lock:
            self._pull()
            for index, message in enumerate(self._arrived):
                if posted.accepts(message):
                    del self._arrived[index]
                    self._deliver(posted, message)
                    return posted
            self._posted.append(posted)
        return posted

    def cancel(self, posted: PostedRecv) -> bool:
        """Withdraw a receive that has not matched yet; False when it already has."""
        with self._lock:
            if posted.message is not None:
                return False
            if posted in self._posted:
                self._posted.remove(posted)
            posted.cancelled = True
            return True

    def probe(self, source: int | None, tag: int | None) -> Message | None:
        """The message a receive for (source, tag) would take now, without taking it."""
        with self._lock:
            self._pull()
            probe = PostedRecv(self, source, tag)
            return next((m for m in self._arrived if probe.accepts(m)), None)

    def claim(self, source: int | None, tag: int | None) -> PostedRecv | None:
        """Match the message a receive for (source, tag) would take now, so no other receive can (MPI's mprobe).

        The result is a receive already holding its message (a synchronous sender is acknowledged now);
        None when no such message has arrived.
        """
        with self._lock:
            self._pull()
            posted = PostedRecv(self, source, tag)
            for index, message in enumerate(self._arrived):
                if posted.accepts(message):
                    del self._arrived[index]
                    self._deliver(posted, message)
                    return posted
        return None

    # ----- progress

    def progress(self, seconds: float) -> None:
        """Drive the transport (blocking at most `seconds`) and match what came in."""
        self.transport.progress(seconds)
        with self._lock:
            self._pull()

    def wait(self, done, what: str, timeout: float | None = None) -> None:
        """Progress until `done()` is true; CommTimeoutError after the group's deadline."""
        limit = self.group.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            with self._lock:
                self._pull()  # what the transport already holds may be all that is needed
            if done():
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommTimeoutError(
                    f"rank {self.group.runtime.rank}: {what} in group {self.group.group_name!r} "
                    f"did not complete within {limit:.1f} s"
                )
            self.progress(min(remaining, _POLL_SLICE))

    def _pull(self) -> None:
        while (taken := self.transport.take(self._ack_key)) is not None:
            (sync_id,) = _ACK.unpack(taken[1])
            posted = self._awaiting_ack.pop(sync_id, None)
            if posted is not None:
                posted.acknowledged = True
        while (taken := self.transport.take(self._data_key)) is not None:
            source, frame = taken
            tag, sync_id = _ENVELOPE.unpack_from(frame)
            message = Message(self.group.group_rank(source), tag, memoryview(frame)[_ENVELOPE.size :], sync_id)
            receiver = next((p for p in self._posted if p.accepts(message)), None)
            if receiver is None:
                self._arrived.append(message)
            else:
                self._posted.remove(receiver)
                self._deliver(receiver, message)
        # What the lost rank sent before it went has been taken above; a receive still waiting for it never ends.
        for posted in [p for p in self._posted if p.source is not None]:
            lost = self.transport.lost(self.group.global_rank(posted.source))
            if lost is not None:
                self._posted.remove(posted)
                posted.error = lost

    def _deliver(self, posted: PostedRecv, message: Message) -> None:
        posted.message = message
        if message.sync_id:
            ack = _ACK.pack(message.sync_id)
            self.transport.isend(self.group.global_rank(message.source), memoryview(ack), self._ack_key)

"""Matching arrived messages to posted receives, by key and sender, in arrival order.

A message whose receive is not posted yet is read into a buffer of its own
(an "unexpected" message), so a rank never stops reading and two ranks
sending large messages to each other at once cannot deadlock. A receive
posted later claims the oldest such message; messages of a kind whose size
the receiver cannot know in advance are never posted for, only taken once
they are in (`take`).

Every piece of this state is guarded by `lock`, which the engine also holds
while it decides where a message's payload goes.
"""

from __future__ import annotations

import collections
import threading

from meshcomm.errors import CollectiveMismatchError, MessageSizeError
from meshcomm.transport import header as wire
from meshcomm.transport.handle import Handle

_CALL_KINDS = (wire.KIND_P2P, wire.KIND_COLLECTIVE, wire.KIND_MAILBOX)  # the messages of a group's calls


class PostedRecv:
    __slots__ = ("handle", "peer", "buffer", "fingerprint")

    def __init__(self, handle: Handle, peer: int | None, buffer: memoryview, fingerprint: bytes) -> None:
        self.handle = handle
        self.peer = peer
        self.buffer = buffer
        self.fingerprint = fingerprint


class Unexpected:
    """A message that arrived before its receive was posted."""

    __slots__ = ("peer", "header", "data", "complete", "claimed_by")

    def __init__(self, peer: int, header: wire.Header) -> None:
        self.peer = peer
        self.header = header
        self.data = bytearray(header.nbytes)
        self.complete = header.nbytes == 0
        self.claimed_by: PostedRecv | None = None


class Matcher:
    """This rank's posted receives and unexpected messages, and the collectives its peers gave up."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.lock = threading.RLock()
        self.posted: dict[wire.Key, list[PostedRecv]] = collections.defaultdict(list)
        self.unexpected: dict[wire.Key, list[Unexpected]] = collections.defaultdict(list)
        self.failed_calls: dict[tuple[int, int], Exception] = {}  # (group, seq) -> why a peer gave it up
        self.revoked: dict[int, Exception] = {}  # group -> why every call of it fails

    def match(self, source: int, head: wire.Header) -> PostedRecv | None:
        """The oldest receive posted for this message (removed from the posted ones), if any."""
        waiting = self.posted.get(head.key)
        if not waiting:
            return None
        for index, posted in enumerate(waiting):
            if posted.peer is None or posted.peer == source:
                del waiting[index]
                if not waiting:
                    del self.posted[head.key]
                posted.handle.source = source
                return posted
        return None

    def accepts(self, posted: PostedRecv, source: int, head: wire.Header) -> bool:
        """Check a matched message against what its receiver expects; fail the receive if not."""
        if (
            posted.fingerprint != wire.NO_FINGERPRINT
            and head.fingerprint != wire.NO_FINGERPRINT
            and posted.fingerprint != head.fingerprint
        ):
            error = CollectiveMismatchError(
                f"rank {self.rank} received from rank {source} a message of a different collective"
            )
            error.mine, error.theirs, error.peer = posted.fingerprint, head.fingerprint, source
            posted.handle.fail(error)
            return False
        if head.nbytes != posted.buffer.nbytes:
            error = MessageSizeError(
                f"rank {self.rank}: message of {head.nbytes} bytes from rank {source} "
                f"does not match the receive buffer of {posted.buffer.nbytes} bytes"
            )
            error.mine, error.theirs, error.peer = posted.fingerprint, head.fingerprint, source
            posted.handle.fail(error)
            return False
        return True

    def keep_unexpected(self, peer: int, head: wire.Header) -> Unexpected:
        message = Unexpected(peer, head)
        self.unexpected[head.key].append(message)
        return message

    def claim(self, key: wire.Key, peer: int | None, posted: PostedRecv) -> Unexpected | None:
        """Let `posted` claim the oldest unclaimed message under `key` from `peer` (None: any); the message."""
        for message in self.unexpected.get(key, ()):
            if message.claimed_by is None and (peer is None or message.peer == peer):
                message.claimed_by = posted
                posted.handle.source = message.peer
                return message
        return None

    def finish_unexpected(self, key: wire.Key, message: Unexpected) -> None:
        """A claimed message is complete: hand its bytes to the receive that claimed it."""
        self.unexpected[key].remove(message)
        if not self.unexpected[key]:
            del self.unexpected[key]
        posted = message.claimed_by
        if posted is not None and self.accepts(posted, message.peer, message.header):
            if message.header.nbytes:
                posted.buffer[:] = message.data
            posted.handle.complete()

    def take(self, key: wire.Key) -> tuple[int, bytearray] | None:
        for message in self.unexpected.get(key, ()):
            if message.complete and message.claimed_by is None:
                self.unexpected[key].remove(message)
                if not self.unexpected[key]:
                    del self.unexpected[key]
                return message.peer, message.data
        return None

    def waits_for(self, peer: int, key: wire.Key) -> bool:
        """Whether a receive is posted for `key`, or for anything from `peer`."""
        if self.posted.get(key):
            return True
        return any(posted.peer is None or posted.peer == peer for waiting in self.posted.values()
                   for posted in waiting)

    def fail_from(self, peer: int, error: Exception) -> None:
        """`peer` is gone: fail the receives waiting for it, and those that claimed its unfinished messages."""
        for key in list(self.posted):
            keep = []
            for posted in self.posted[key]:
                if posted.peer == peer:
                    posted.handle.fail(error)
                else:
                    keep.append(posted)
            if keep:
                self.posted[key] = keep
            else:
                del self.posted[key]
        for messages in self.unexpected.values():
            for message in messages:
                if message.peer == peer and not message.complete and message.claimed_by is not None:
                    message.claimed_by.handle.fail(error)

    def fail_all(self, error: Exception) -> None:
        for waiting in self.posted.values():
            for posted in waiting:
                posted.handle.fail(error)
        self.posted.clear()

    def fail_call(self, group: int, seq: int, error: Exception) -> None:
        """Collective (group, seq) was given up: fail its receives, now and when posted later."""
        self.failed_calls[group, seq] = error
        for key in [k for k in self.posted if k.kind == wire.KIND_COLLECTIVE and k.group == group and k.seq == seq]:
            for posted in self.posted.pop(key):
                posted.handle.fail(error)

    def revoke(self, group: int, error: Exception) -> None:
        """Every call of `group` fails, now and when posted later (see revoked_error)."""
        self.revoked.setdefault(group, error)
        for key in [k for k in self.posted if self.revoked_error(k) is not None]:
            for posted in self.posted.pop(key):
                posted.handle.fail(self.revoked[group])

    def revoked_error(self, key: wire.Key) -> Exception | None:
        """Why a message with `key` may not move: a call's message (not a notice) in a revoked group."""
        error = self.revoked.get(key.group)
        return error if error is not None and key.kind in _CALL_KINDS else None

    def first_message_of_call(self, group: int, seq: int) -> Unexpected | None:
        """A message that arrived for collective (group, seq), which this rank runs without messages."""
        for key, messages in self.unexpected.items():
            if key.kind == wire.KIND_COLLECTIVE and key.group == group and key.seq == seq and messages:
                return messages[0]
        return None

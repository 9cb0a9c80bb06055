"""Failure notices between ranks, and the errors they stand for.

A *notice* (header.KIND_NOTICE) is the last message a rank sends on a
connection: it aborted, or it lost a rank during a collective, so the job
is broken and the receiver fails everything too. A *call-failed* message
(header.KIND_CALL_FAILED) says one collective failed at its sender (a
mismatch it found, a timeout), or that a group was revoked; the receiver
fails its part of that call (or every call of that group) only, and the
connection stays usable. Errors made from either carry
`from_notice`, so they are not passed on again.
"""

from __future__ import annotations

import socket

from meshcomm.errors import AbortedError, CollectiveMismatchError, CommTimeoutError, PeerLostError, RevokedError
from meshcomm.transport import header as wire


class Notice(Exception):
    """A peer's notice arrived: the job is broken (it aborted, or lost a rank during a collective)."""

    def __init__(self, head: wire.Header, text: str) -> None:
        super().__init__(text)
        self.reason = head.key.group
        self.peer = head.key.seq if head.key.seq >= 0 else None
        self.text = text

    @classmethod
    def read(cls, head: wire.Header, sock: socket.socket) -> "Notice":
        """The notice's text follows its header in the same segment; take what is there without blocking."""
        wanted = min(head.nbytes, wire.NOTICE_TEXT_BYTES)
        text = b""
        try:
            if wanted:
                text = sock.recv(wanted)
        except OSError:
            pass
        return cls(head, text.decode(errors="replace"))


def notice_error(rank: int, sender: int, notice: Notice) -> Exception:
    """The error a peer's notice stands for."""
    if notice.reason == wire.NOTICE_ABORT:
        error: Exception = AbortedError(f"rank {rank}: rank {sender} called abort()" + (f": {notice.text}" if notice.text else ""))
    else:
        error = PeerLostError(f"rank {rank}: rank {notice.peer} was lost (rank {sender} lost its connection to it "
                              "and told this rank)", notice.peer)
    error.from_notice = True
    return error


def call_failed_error(rank: int, sender: int, key: wire.Key, text: str) -> Exception:
    """The error of a peer's call-failed message for collective (key.group, key.seq)."""
    if key.step == wire.NOTICE_REVOKE:
        error: Exception = RevokedError(f"rank {rank}: group {key.group} was revoked by rank {sender}"
                                        + (f": {text}" if text else ""))
    elif key.step == wire.NOTICE_TIMEOUT:
        error = CommTimeoutError(f"rank {rank}: rank {sender} gave up on this collective: {text}")
    else:
        error = CollectiveMismatchError(f"rank {rank}: rank {sender} found a {text}")
    error.from_notice = True
    return error

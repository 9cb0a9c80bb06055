"""The fixed header in front of every message, and the key that matches messages.

Fields are fixed-width so a header is parsed without trusting anything a
stranger could choose: lengths are checked against the receive buffer before
a byte of payload is read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = b"MC"
# magic, kind, flags, group, seq (signed: p2p tags), step, fingerprint, nbytes
_HEADER = struct.Struct("!2sBBIqI16sQ")
HEADER_BYTES = _HEADER.size
FINGERPRINT_BYTES = 16
NO_FINGERPRINT = bytes(FINGERPRINT_BYTES)

KIND_P2P = 1
KIND_COLLECTIVE = 2
KIND_NOTICE = 3  # the last message a rank sends on a connection: the job is broken (see notice())
KIND_CALL_FAILED = 4  # one collective (group, seq) failed at the sender: the receiver fails its part of it too
NOTICE_ABORT, NOTICE_LOST, NOTICE_MISMATCH, NOTICE_TIMEOUT = 0, 1, 2, 3  # why, in a notice's key
NOTICE_REVOKE = 4  # a call-failed message with this reason revokes its whole group (seq -1)
NOTICE_TEXT_BYTES = 1024  # most text a notice carries; a longer length field is refused
KIND_MAILBOX = 5  # taken whole by Transport.take, whatever its size (MPI-style matching above)
_KINDS = (KIND_P2P, KIND_COLLECTIVE, KIND_NOTICE, KIND_CALL_FAILED, KIND_MAILBOX)
# flags: the payload is not the message but the address of the sender's
# buffer, which the receiver reads itself (same host, cma.py)
FLAG_BY_REFERENCE = 1


class Key(NamedTuple):
    """What a receive waits for: messages with equal keys match in arrival order."""

    kind: int
    group: int
    seq: int
    step: int


class Header(NamedTuple):
    key: Key
    fingerprint: bytes
    nbytes: int  # of the message (a reference's own bytes follow the header instead)
    flags: int = 0


def pack(key: Key, fingerprint: bytes, nbytes: int, flags: int = 0) -> bytes:
    return _HEADER.pack(MAGIC, key.kind, flags, key.group, key.seq, key.step, fingerprint, nbytes)


def unpack(data: bytes | bytearray | memoryview) -> Header:
    """Parse a header; ValueError for anything that is not one of ours."""
    magic, kind, flags, group, seq, step, fingerprint, nbytes = _HEADER.unpack(data)
    if magic != MAGIC or kind not in _KINDS or flags & ~FLAG_BY_REFERENCE:
        raise ValueError(f"not a meshcomm message header: {bytes(data[:8])!r}")
    return Header(Key(kind, group, seq, step), fingerprint, nbytes, flags)


def notice(reason: int, peer: int | None, text: str) -> bytes:
    """Header and text of a connection-ending notice: this rank aborted (peer None) or lost rank `peer`."""
    body = text.encode(errors="replace")[:NOTICE_TEXT_BYTES]
    return pack(Key(KIND_NOTICE, reason, -1 if peer is None else peer, 0), NO_FINGERPRINT, len(body)) + body

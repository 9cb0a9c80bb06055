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
KIND_MAILBOX = 3  # taken whole by Transport.take, whatever its size (MPI-style matching above)


class Key(NamedTuple):
    """What a receive waits for: messages with equal keys match in arrival order."""

    kind: int
    group: int
    seq: int
    step: int


class Header(NamedTuple):
    key: Key
    fingerprint: bytes
    nbytes: int


def pack(key: Key, fingerprint: bytes, nbytes: int) -> bytes:
    return _HEADER.pack(MAGIC, key.kind, 0, key.group, key.seq, key.step, fingerprint, nbytes)


def unpack(data: bytes | bytearray | memoryview) -> Header:
    """Parse a header; ValueError for anything that is not one of ours."""
    magic, kind, _flags, group, seq, step, fingerprint, nbytes = _HEADER.unpack(data)
    if magic != MAGIC or kind not in (KIND_P2P, KIND_COLLECTIVE, KIND_MAILBOX):
        raise ValueError(f"not a meshcomm message header: {bytes(data[:8])!r}")
    return Header(Key(kind, group, seq, step), fingerprint, nbytes)

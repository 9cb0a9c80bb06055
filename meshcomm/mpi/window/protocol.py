"""What an origin sends to a window's target thread, and what comes back.

A request is one mailbox message with tag REQUEST on the window's own
communicator: a fixed header (kind, lock type, op, the tag to reply under,
the target displacement, the number of target bytes, the length of the
element type's description), the element type's numpy description, then the
origin's data (for compare-and-swap: the new value, then the compare value).
A reply goes back under the request's reply tag: one status byte (0, or
the MPI error class of what went wrong at the target), then the fetched
bytes, or the error's text.
"""

from __future__ import annotations

import ast
import struct

import numpy as np

REQUEST_TAG = 0
FIRST_REPLY_TAG = 1

PUT, GET, ACCUMULATE, GET_ACCUMULATE, COMPARE_AND_SWAP, FLUSH, LOCK, UNLOCK, COMPLETE = range(9)
SHARED_LOCK, EXCLUSIVE_LOCK = 0, 1

# Predefined ops travel by their index here; the target applies the same Op object.
OP_NAMES = ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MAXLOC", "MINLOC",
            "REPLACE", "NO_OP")

_HEADER = struct.Struct("!BBBxIqqH")
_STATUS = struct.Struct("!B")


class Request:
    """One decoded request: its header fields, its element type, and its data."""

    __slots__ = ("kind", "lock", "op", "reply_tag", "disp", "nbytes", "dtype", "data")

    def __init__(self, kind: int, lock: int, op: int, reply_tag: int, disp: int, nbytes: int, dtype: np.dtype,
                 data: memoryview) -> None:
        self.kind, self.lock, self.op, self.reply_tag = kind, lock, op, reply_tag
        self.disp, self.nbytes, self.dtype, self.data = disp, nbytes, dtype, data


def encode(kind: int, reply_tag: int = 0, disp: int = 0, nbytes: int = 0, dtype: np.dtype = np.dtype(np.uint8),
           data: tuple = (), op: int = 0, lock: int = 0) -> bytearray:
    descr = repr(np.lib.format.dtype_to_descr(dtype)).encode()
    frame = bytearray(_HEADER.pack(kind, lock, op, reply_tag, disp, nbytes, len(descr)))
    frame += descr
    for piece in data:
        frame += memoryview(piece).cast("B")
    return frame


def decode(payload: memoryview) -> Request:
    kind, lock, op, reply_tag, disp, nbytes, descr_len = _HEADER.unpack_from(payload)
    start = _HEADER.size + descr_len
    descr = ast.literal_eval(bytes(payload[_HEADER.size : start]).decode())
    return Request(kind, lock, op, reply_tag, disp, nbytes, np.lib.format.descr_to_dtype(descr), payload[start:])


def reply(error_class: int = 0, data=b"") -> bytearray:
    frame = bytearray(_STATUS.pack(error_class))
    frame += memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    return frame


def read_reply(payload: memoryview) -> tuple[int, memoryview]:
    """(error class, the rest): the fetched bytes when the class is 0, else the error's text."""
    return payload[0], payload[_STATUS.size :]

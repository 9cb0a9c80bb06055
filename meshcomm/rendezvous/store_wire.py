"""The store's wire format, shared by its server (store_server.py) and its client (tcp_store.py).

After the auth handshake every message is a frame `u32 length | body`. A
request body is `u8 opcode` followed by arguments, each `u32 length | bytes`;
a response body is `u8 status` followed by arguments the same way. Blocking
requests (GET, WAIT) carry their timeout; the server parks them and answers
when the keys appear or the timeout passes, so one waiting client never holds
up another.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence

# A frame larger than this is garbage or an attack, never a real request.
MAX_FRAME = 64 << 20
# How long an accepted connection may take to prove it holds the token.
HANDSHAKE_TIMEOUT = 10.0
# Handshakes in flight at once; beyond this new connections are refused so a
# flood of silent sockets cannot exhaust threads.
MAX_PENDING_HANDSHAKES = 256
# Extra time a client waits past a blocking request's deadline for the
# server's own timeout answer before it gives the connection up.
REPLY_GRACE = 10.0

SET, GET, ADD, CAS, WAIT, CHECK, DELETE, NUM_KEYS = range(1, 9)
OK, TIMEOUT, ERROR = range(3)
OP_NAMES = {SET: "set", GET: "get", ADD: "add", CAS: "compare_set", WAIT: "wait", CHECK: "check", DELETE: "delete_key", NUM_KEYS: "num_keys"}

U32 = struct.Struct("!I")
F64 = struct.Struct("!d")
I64 = struct.Struct("!q")


class ProtocolError(Exception):
    """A frame that does not parse; the connection that sent it is dropped."""


def encode_frame(code: int, args: Sequence[bytes]) -> bytes:
    body = bytearray([code])
    for arg in args:
        body += U32.pack(len(arg))
        body += arg
    return U32.pack(len(body)) + bytes(body)


def decode_body(body: bytes | bytearray) -> tuple[int, list[bytes]]:
    if not body:
        raise ProtocolError("empty frame")
    code, args, pos = body[0], [], 1
    while pos < len(body):
        if pos + 4 > len(body):
            raise ProtocolError("truncated argument length")
        (n,) = U32.unpack_from(body, pos)
        pos += 4
        if pos + n > len(body):
            raise ProtocolError("argument runs past the frame")
        args.append(bytes(body[pos : pos + n]))
        pos += n
    return code, args


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"

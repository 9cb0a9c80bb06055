"""Mutual HMAC challenge-response proving both ends of a connection hold the job token.

Each side sends a fresh random nonce and answers the other's nonce with
HMAC-SHA256(token, purpose + nonce + own role). Nothing else is read from a
connection until it has passed, so a process without the token cannot issue a
store command or feed bytes to unpickling. With no token (jobs started by
torchrun or mpiexec without MESHCOMM_TOKEN) the key is empty: this still
rejects strangers speaking another protocol, but not a deliberate attacker.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import time

from meshcomm import config
from meshcomm.errors import AuthenticationError

NONCE_BYTES = 32
DIGEST_BYTES = 32
MAGIC = b"MESHCOMM1"


def generate_token() -> str:
    """A fresh job token (hex), as the launcher hands it to every rank."""
    return secrets.token_hex(32)


def job_token() -> bytes:
    """The job token from MESHCOMM_TOKEN, or b'' when the job was started without one."""
    return config.get("MESHCOMM_TOKEN").encode()


def _digest(token: bytes, purpose: bytes, nonce: bytes, role: bytes) -> bytes:
    return hmac.new(token, MAGIC + purpose + nonce + role, hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, nbytes: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < nbytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AuthenticationError("peer did not complete the handshake in time")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(nbytes - len(data))
        except socket.timeout:
            raise AuthenticationError("peer did not complete the handshake in time") from None
        except OSError as exc:
            raise AuthenticationError(f"connection failed during handshake: {exc}") from None
        if not chunk:
            raise AuthenticationError("peer closed the connection during the handshake")
        data += chunk
    return bytes(data)


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    try:
        sock.sendall(data)
    except OSError as exc:
        raise AuthenticationError(f"connection failed during handshake: {exc}") from None


def handshake(sock: socket.socket, token: bytes, purpose: bytes, is_server: bool, timeout: float) -> None:
    """Run the mutual challenge on a connected socket; raises AuthenticationError.

    The server speaks first (MAGIC + nonce) so a client that connected to
    something that is not meshcomm fails at once instead of waiting.
    """
    deadline = time.monotonic() + timeout
    mine = os.urandom(NONCE_BYTES)
    my_role, their_role = (b"S", b"C") if is_server else (b"C", b"S")
    if is_server:
        _send_all(sock, MAGIC + mine, deadline)
        # The magic alone first, so a stranger sending a short line is dropped at
        # once rather than waited on for the rest of a hello that never comes.
        if _recv_exact(sock, len(MAGIC), deadline) != MAGIC:
            raise AuthenticationError("peer does not speak the meshcomm protocol")
        hello = _recv_exact(sock, NONCE_BYTES + DIGEST_BYTES, deadline)
        theirs = hello[:NONCE_BYTES]
        proof = hello[NONCE_BYTES:]
        if not hmac.compare_digest(proof, _digest(token, purpose, mine, their_role)):
            raise AuthenticationError("peer does not hold the job token")
        _send_all(sock, _digest(token, purpose, theirs, my_role), deadline)
    else:
        if _recv_exact(sock, len(MAGIC), deadline) != MAGIC:
            raise AuthenticationError("server does not speak the meshcomm protocol")
        theirs = _recv_exact(sock, NONCE_BYTES, deadline)
        _send_all(sock, MAGIC + mine + _digest(token, purpose, theirs, my_role), deadline)
        proof = _recv_exact(sock, DIGEST_BYTES, deadline)
        if not hmac.compare_digest(proof, _digest(token, purpose, mine, their_role)):
            raise AuthenticationError("server does not hold the job token (or refused ours)")
    sock.settimeout(None)

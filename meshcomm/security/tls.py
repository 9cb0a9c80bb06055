"""Optional TLS on the store's and the transport's TCP connections (MESHCOMM_TLS_CERT / _KEY / _CA).

Both ends present a certificate and verify the other's against the CA
(mutual TLS, 1.2 or newer). Ranks dial addresses, not names, so host names
are not checked: a peer is trusted because the CA signed its certificate
and, inside the TLS channel, it proves it holds the job token (auth.py).
With no MESHCOMM_TLS_CA the certificate is its own CA, so one self-signed
certificate and key copied to every host is enough.

The token handshake runs inside TLS rather than before it: nothing of the
protocol is readable on the wire, and a stranger that does not speak TLS is
dropped before any meshcomm byte is exchanged. It is not bound to the TLS
session (Python's ssl module offers no TLS 1.3 exporter), so the CA's key
must be kept as secret as the token: anyone with a certificate it signed
could relay a handshake between two ranks.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from meshcomm import config
from meshcomm.errors import AuthenticationError

# Plaintext handed to OpenSSL per call; a write that would block must be
# repeated with the same bytes, so the slice also bounds what is owed.
_WRITE_SLICE = 1 << 20
# How a handshake ends when the other side just went away, rather than refused.
_CLOSED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


@dataclass(frozen=True)
class Tls:
    """The job's TLS contexts: one to dial with, one to accept with."""

    client: ssl.SSLContext
    server: ssl.SSLContext

    def handshake(self, sock: socket.socket, server_side: bool, timeout: float) -> ssl.SSLSocket:
        """Run the TLS handshake on a connected socket (which the result replaces).

        A certificate the other side refused, or one it presented that the CA
        did not sign, raises AuthenticationError; a connection that simply
        closed raises OSError, as a plain connection would.
        """
        wrapped = self.wrap(sock, server_side)
        try:
            wrapped.settimeout(timeout)
            wrapped.do_handshake()
        except BaseException as exc:
            wrapped.close()
            if isinstance(exc, ssl.SSLError) and not isinstance(exc, _CLOSED):
                # The full text: a verification failure says why there ("self-signed certificate").
                raise AuthenticationError(f"TLS handshake refused: {exc}") from None
            raise
        return wrapped

    def wrap(self, sock: socket.socket, server_side: bool) -> ssl.SSLSocket:
        """The TLS socket over `sock` (detached from it), before its handshake."""
        context = self.server if server_side else self.client
        return context.wrap_socket(sock, server_side=server_side, do_handshake_on_connect=False)


def from_environment() -> Tls | None:
    """The contexts MESHCOMM_TLS_* describe, or None when TLS is off.

    Every mistake (one variable without the other, a file that cannot be
    read, a certificate that does not parse or does not match the key) is a
    ValueError naming the variable and the path, raised before any connection.
    """
    cert, key, ca = (config.get(f"MESHCOMM_TLS_{name}") for name in ("CERT", "KEY", "CA"))
    if not cert and not key:
        if ca:
            raise ValueError(f"MESHCOMM_TLS_CA={ca} is set but MESHCOMM_TLS_CERT and MESHCOMM_TLS_KEY are not")
        return None
    if not cert or not key:
        given, missing = ("MESHCOMM_TLS_CERT", "MESHCOMM_TLS_KEY") if cert else ("MESHCOMM_TLS_KEY", "MESHCOMM_TLS_CERT")
        raise ValueError(f"{given}={cert or key} is set but {missing} is not: TLS needs both")
    ca_variable = "MESHCOMM_TLS_CA" if ca else "MESHCOMM_TLS_CERT"
    for variable, path in (("MESHCOMM_TLS_CERT", cert), ("MESHCOMM_TLS_KEY", key), (ca_variable, ca or cert)):
        _check_readable(variable, path)
    return Tls(_context(ssl.PROTOCOL_TLS_CLIENT, cert, key, ca), _context(ssl.PROTOCOL_TLS_SERVER, cert, key, ca))


def _check_readable(variable: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ValueError(f"{variable}={path} cannot be read: {exc.strerror or exc}") from None


def _encrypted_key() -> bytes:
    # Called by OpenSSL only for a key that needs a passphrase; without it a
    # rank would stop and prompt on its terminal.
    raise ValueError("the key is encrypted")


def _context(protocol: int, cert: str, key: str, ca: str) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # ranks dial addresses; the CA and the token are the identity
    context.verify_mode = ssl.CERT_REQUIRED
    # A read must never need a write: no renegotiation (TLS 1.2), and no
    # session tickets, the only message a TLS 1.3 server sends after the
    # handshake unasked (nothing here resumes sessions).
    context.options |= ssl.OP_NO_RENEGOTIATION
    if protocol == ssl.PROTOCOL_TLS_SERVER:
        context.num_tickets = 0
    ca_variable, ca_path = ("MESHCOMM_TLS_CA", ca) if ca else ("MESHCOMM_TLS_CERT", cert)
    try:
        context.load_verify_locations(cafile=ca_path)
    except ssl.SSLError as exc:
        raise ValueError(f"{ca_variable}={ca_path} holds no certificate to verify peers with: {exc.reason or exc}") from None
    try:
        context.load_cert_chain(cert, key, password=_encrypted_key)
    except ssl.SSLError as exc:
        raise ValueError(
            f"MESHCOMM_TLS_CERT={cert} and MESHCOMM_TLS_KEY={key} are not a PEM certificate and its "
            f"private key: {exc.reason or exc}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"MESHCOMM_TLS_KEY={key} cannot be used: {exc}") from None
    return context


class TlsStream:
    """A connected TLS socket in non-blocking mode, with a plain socket's contract.

    Callers written for plain sockets expect BlockingIOError when nothing can
    move, a byte count from every write, and 0 from a read at the end; here
    is where ssl's SSLWantRead/WriteError and all-or-nothing writes are
    turned into that. With renegotiation and session tickets off (`_context`)
    a read never waits on a write, nor a write on a read; should one still
    report the other want, it is reported as would-block and retried on the
    next call.

    OpenSSL may hold decrypted bytes that select() cannot see: `recv` takes
    them before it returns, and `recv_into` callers must read until
    BlockingIOError (the transport's `_read` does).
    """

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock = sock
        self._owed = 0  # bytes of a blocked write: the next write must start with the same bytes
        sock.setblocking(False)

    def fileno(self) -> int:
        return self._sock.fileno()

    def pending(self) -> int:
        return self._sock.pending()

    @property
    def mid_write(self) -> bool:
        """A write blocked part-way: nothing else may be sent before its bytes are."""
        return self._owed > 0

    def recv_into(self, buffer: memoryview) -> int:
        try:
            return self._sock.recv_into(buffer)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        # Raised out here so that no ssl exception (and its frames) is chained onto it.
        raise BlockingIOError("the TLS record is not complete yet")

    def recv(self, nbytes: int) -> bytes:
        data = bytearray(nbytes)
        with memoryview(data) as view:
            got = self.recv_into(view)
            while got < nbytes and self._sock.pending():
                got += self.recv_into(view[got:])
        del data[got:]
        return bytes(data)

    def sendmsg(self, views: list[memoryview]) -> int:
        """Send from `views` in order; the bytes taken (BlockingIOError if none).

        After a write that blocked, the caller must pass the same bytes first
        again (the transport and the store only ever append behind unsent
        bytes), as OpenSSL requires of a retried write.
        """
        taken = 0
        for view in views:
            offset = 0
            while offset < view.nbytes:
                with view[offset : offset + (self._owed or _WRITE_SLICE)] as piece:
                    try:
                        sent = self._sock.send(piece)
                    except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                        self._owed = piece.nbytes
                        sent = 0
                if not sent:
                    if taken:
                        return taken
                    raise BlockingIOError("the socket's send buffer is full")
                self._owed = 0
                offset += sent
                taken += sent
        return taken

    def send(self, data: bytes | bytearray | memoryview) -> int:
        with memoryview(data) as view, view.cast("B") as octets:
            return self.sendmsg([octets])

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()

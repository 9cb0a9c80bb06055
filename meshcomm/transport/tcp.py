"""TCP connections between the ranks of a job: listening, dialling, admitting, and tuning each socket.

Every rank listens on an ephemeral port and publishes its address in the
store. At start-up each rank connects to every higher rank (a pair has one
connection, opened by its lower rank) while an accept thread answers the
lower ranks, so connecting never depends on what the peer's main thread is
doing. The accept thread keeps running afterwards to turn away strangers.

With MESHCOMM_TLS_CERT/KEY set (security/tls.py) every connection runs TLS,
then the token handshake inside it. A rank learns which peers share its host
only after connecting (local.py), so the rule is simply every connection.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

from meshcomm.errors import AuthenticationError, RendezvousError
from meshcomm.security import auth
from meshcomm.security.tls import Tls, TlsStream

_RANK = struct.Struct("!I")
_SOCKET_BUFFER = 4 << 20
HANDSHAKE_TIMEOUT = 10.0


class Listener:
    """This rank's listening socket and the thread that admits the lower ranks' connections (and no one else)."""

    def __init__(self, rank: int, world_size: int, address: str, token: bytes, tls: Tls | None) -> None:
        self._rank = rank
        self._token = token
        self._tls = tls
        self._closed = False
        self._socket = socket.create_server((address, 0), backlog=max(world_size, 16))
        self.address = f"{address}:{self._socket.getsockname()[1]}"
        self._accepted: dict[int, socket.socket] = {}
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._accept_loop, name="meshcomm-accept", daemon=True)
        self._thread.start()

    def accepted(self, deadline: float, timeout: float) -> dict[int, socket.socket]:
        """The connections of every lower rank, once all have arrived; RendezvousError at `deadline`."""
        with self._cv:
            while len(self._accepted) < self._rank:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(self._rank)) - set(self._accepted))
                    raise RendezvousError(
                        f"rank {self._rank}: data connections from ranks {missing} did not arrive "
                        f"within {timeout:.1f} s"
                    )
                self._cv.wait(min(remaining, 0.5))
            return dict(self._accepted)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._socket.accept()
            except OSError:
                return
            # A handshake may be slow or hostile: answer it off this loop so one
            # silent connection cannot keep real peers waiting.
            threading.Thread(target=self._admit, args=(sock,), daemon=True).start()

    def _admit(self, sock: socket.socket) -> None:
        try:
            if self._tls is not None:
                sock = self._tls.handshake(sock, server_side=True, timeout=HANDSHAKE_TIMEOUT)
            auth.handshake(sock, self._token, b"data", is_server=True, timeout=HANDSHAKE_TIMEOUT)
            sock.settimeout(HANDSHAKE_TIMEOUT)
            raw = b""
            while len(raw) < _RANK.size:
                chunk = sock.recv(_RANK.size - len(raw))
                if not chunk:
                    raise OSError("closed before naming its rank")
                raw += chunk
            (peer,) = _RANK.unpack(raw)
            if not 0 <= peer < self._rank:
                raise OSError(f"claimed rank {peer}, which does not connect to rank {self._rank}")
            with self._cv:
                if peer in self._accepted:
                    raise OSError(f"rank {peer} connected twice")
                self._accepted[peer] = sock
                self._cv.notify_all()
        except (AuthenticationError, OSError, struct.error):
            sock.close()

    def close(self, keep) -> None:
        """Stop accepting; close the admitted connections not in `keep` (those a transport took over)."""
        self._closed = True
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        with self._cv:
            for sock in self._accepted.values():
                if sock.fileno() != -1 and all(sock is not kept for kept in keep):
                    sock.close()
        self._thread.join(timeout=2)


def dial(rank: int, peer: int, host: str, port: int, token: bytes, tls: Tls | None,
         deadline: float) -> socket.socket:
    """Connect to `peer` at host:port, retrying until `deadline`, and prove this rank holds the token."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            sock = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.001))
        except OSError as exc:
            last_error = exc
            time.sleep(0.05)
            continue
        try:
            if tls is not None:
                sock = tls.handshake(sock, server_side=False, timeout=HANDSHAKE_TIMEOUT)
            auth.handshake(sock, token, b"data", is_server=False, timeout=HANDSHAKE_TIMEOUT)
            sock.sendall(_RANK.pack(rank))
        except AuthenticationError as exc:
            sock.close()
            raise AuthenticationError(f"rank {rank}: connection to rank {peer} at {host}:{port}: {exc}") from None
        except OSError:
            sock.close()
            raise
        return sock
    raise RendezvousError(f"rank {rank} could not connect to rank {peer} at {host}:{port}: {last_error}")


def data_socket(sock: socket.socket, tls: Tls | None) -> socket.socket | TlsStream:
    """Tune an admitted or dialled connection for messages (no delay, large buffers, non-blocking)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _probe_when_silent(sock)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
        except OSError:
            pass
    sock.settimeout(None)
    sock.setblocking(False)
    return sock if tls is None else TlsStream(sock)


def _probe_when_silent(sock: socket.socket) -> None:
    """Have the kernel close a connection whose peer's host has gone silent.

    A host that loses power or its link sends no FIN or RST, so the connection
    would look idle until a collective's timeout. On an idle connection,
    keepalive probes after 1 s without traffic, 1 s apart, give up after 4
    unanswered; with data in flight, TCP_USER_TIMEOUT gives up when it has
    gone unacknowledged for 5 s (instead of ~15 minutes of retransmissions).
    Either way such a peer is reported lost within about 5 s. A live receiver
    that reads late is not cut: its kernel acknowledges what it buffers, and
    answers the window probes once its buffer is full.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 1), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 4), ("TCP_USER_TIMEOUT", 5000)):
        if hasattr(socket, option):  # Linux names; elsewhere the system's keepalive defaults apply
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)

"""A process's lifeline: a small store server it runs from its first group on, for survivors to meet at.

After a rank fails, the job's store may be gone with it (rank 0 serves it),
and the data connections are torn down. The survivors still need to agree on
who is left, and the lowest of them then serves their new group's store.
Every process serves one lifeline for its whole life (a StoreServer on a
daemon thread), and a group's members know each other's addresses from the
group's start. A lifeline that refuses connections is a process that is gone:
the kernel closed its port. See docs/failures.md.
"""

from __future__ import annotations

import atexit
import socket
import threading
import time

from meshcomm.errors import AuthenticationError, PeerLostError
from meshcomm.rendezvous.store import PrefixStore
from meshcomm.rendezvous.store_server import StoreServer
from meshcomm.rendezvous.tcp_store import TCPStore, _master_bind_host

SILENT_SECONDS = 2.0  # a live host completes a TCP handshake far sooner, even loaded (the kernel answers it)
SILENT_AGAIN_SECONDS = 0.2  # for a host the transport already found silent: a last look, not a second wait
_lock = threading.Lock()
_served: "Lifeline | None" = None


class Lifeline:
    """This process's lifeline server, and a client of it for this process's own records."""

    def __init__(self, host: str, token: bytes) -> None:
        self.server = StoreServer(_master_bind_host(host), 0, token)
        self.server.start()
        self.address = f"{host}:{self.server.port}"
        self.token = token
        self.own = TCPStore(host, self.server.port, timeout=30.0, token=token)
        # Its own client is let go at exit, quietly; the server serves on until the process ends, as a group of
        # survivors' store may still be lingering on it then.
        atexit.register(self.own.close)

    def close(self) -> None:
        atexit.unregister(self.own.close)
        self.own.close()
        self.server.close()

    def record(self, key: str, value: bytes) -> None:
        self.own.set(key, value)


def of_process(host: str, token: bytes) -> Lifeline:
    """The lifeline this process serves, started at the first call (again for a job with another token)."""
    global _served
    with _lock:
        if _served is not None and _served.token != token:
            _served.close()
            _served = None
        if _served is None:
            _served = Lifeline(host, token)
        return _served


def connect(address: str, token: bytes, timeout: float, silent_after: float = SILENT_SECONDS) -> TCPStore | None:
    """A client of the lifeline at `address`, or None when no process serves it any more.

    A refused connection is a process that exited; a host that does not answer a connection within
    `silent_after` (SILENT_SECONDS) is gone or cut off. A connection reset in the handshake is a process exiting, and a refused
    token is a stranger that took a dead member's port: all mean the member is gone."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=min(timeout, silent_after)).close()
    except OSError:  # refused, unreachable, or silent
        return None
    try:
        return TCPStore(host, int(port), timeout=timeout, token=token, wait_for_server=False)
    except (PeerLostError, AuthenticationError):
        return None


class SurvivorStore(PrefixStore):
    """A survivors' group's store: its part of the coordinator's lifeline.

    A member that leaves says so (leave()); on the coordinator, linger() keeps the process serving until every
    other member has left or is gone, as the job's first store does."""

    def __init__(self, prefix: str, client: TCPStore, me: int, lifelines: list[str], token: bytes,
                 serving: bool) -> None:
        super().__init__(prefix, client)
        self._me, self._lifelines, self._token, self._serving = me, lifelines, token, serving

    def leave(self) -> None:
        try:
            self.set(f"left/{self._me}", b"1")
        except Exception:  # the coordinator is gone: nobody waits for this member there
            pass

    def linger(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        waiting = [r for r in range(len(self._lifelines)) if r != self._me] if self._serving else []
        while waiting and time.monotonic() < deadline:
            waiting = [r for r in waiting if not self.check([f"left/{r}"])
                       and not is_gone(self._lifelines[r], self._token, 1.0)]
            if waiting:
                time.sleep(0.05)


def is_gone(address: str, token: bytes, timeout: float) -> bool:
    """Whether the process that served `address` has exited (its port refuses connections)."""
    store = connect(address, token, timeout)
    if store is None:
        return True
    store.close()
    return False

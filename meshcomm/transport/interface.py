"""Transport: the contract every layer above relies on to move tagged bytes between the ranks of one job.

A transport is the set of connections of one job (Gloo's "context"); each
connection to one peer (a "pair") is a `Peer` in peer.py, whose bytes go
over a TCP socket (tcp.py) or a shared-memory ring (shm.py). Messages are
matched by a `Key` (header.py) and by sender; a receive from `None` takes
the first sender. Nothing moves in the background: whoever waits on a
handle drives the connections.

Implementations: engine.SocketTransport, and trace.messages.TracedTransport,
which records every message of the one it wraps.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence

from meshcomm.transport.handle import Handle
from meshcomm.transport.header import NO_FINGERPRINT, Key


class Transport(abc.ABC):
    """Tagged byte buffers between the ranks of one job; every wait has a deadline."""

    rank: int
    world_size: int
    timeout: float  # the default deadline of `wait`
    host_of: Sequence[int]  # every rank's host index
    link_labels: Sequence[int]  # per rank, a label shared by the ranks this one reaches through shared memory
    crowded: bool  # this host runs more ranks than it has cores
    revoked_groups: Mapping[int, Exception]  # group -> why it was revoked (here or by a peer); live, read-only to callers
    aborted: Exception | None  # the abort's error once aborted (raise_if_aborted raises it), else None; read-only

    # ----- messages

    @abc.abstractmethod
    def isend(self, peer: int, payload: memoryview, key: Key, fingerprint: bytes = NO_FINGERPRINT,
              message_bytes: int | None = 0) -> Handle:
        """Queue `payload` for `peer` (not copied: keep it unchanged until the handle completes).

        `message_bytes`: the whole message when `payload` is one piece of it; None: never by reference."""

    @abc.abstractmethod
    def irecv(self, peer: int | None, buffer: memoryview, key: Key, fingerprint: bytes = NO_FINGERPRINT) -> Handle:
        """Post a receive into `buffer` from `peer` (None: any peer); the handle records the source."""

    @abc.abstractmethod
    def take(self, key: Key) -> tuple[int, bytearray] | None:
        """The oldest fully arrived message under `key` that no receive claimed, as (source, payload)."""

    # ----- progress

    @abc.abstractmethod
    def wait(self, handles: list[Handle], timeout: float | None = None) -> None:
        """Drive the connections until every handle completes; raise a failure if any did, or
        CommTimeoutError after `timeout` (default: the transport's)."""

    @abc.abstractmethod
    def progress(self, timeout: float) -> None:
        """One round of work on the connections, blocking at most `timeout` seconds."""

    @abc.abstractmethod
    def test(self, handle: Handle) -> bool:
        """Make progress without blocking; True when the handle is done."""

    # ----- failures

    @abc.abstractmethod
    def check_call(self, peers: list[int], group: int, seq: int) -> None:
        """Raise what makes waiting for collective (group, seq) pointless: an abort, a lost peer, a peer
        giving the call up, or a message for it (a peer runs it as messages)."""

    @abc.abstractmethod
    def fail_call(self, peers: list[int], group: int, seq: int, reason: int, text: str) -> None:
        """Tell `peers` that collective (group, seq) failed here; the connections stay usable."""

    @abc.abstractmethod
    def revoke(self, peers: list[int], group: int, text: str) -> None:
        """Fail every pending and later call of `group` here, and tell `peers` to do the same."""

    @abc.abstractmethod
    def silent_peers(self) -> set[int]:
        """Peers whose connection the kernel gave up on because their host stopped answering."""

    @abc.abstractmethod
    def lost(self, peer: int) -> Exception | None:
        """The error that ended the connection to `peer`, or None while it lives."""

    @abc.abstractmethod
    def tell_peers(self, peers: list[int], reason: int, peer: int | None, text: str) -> None:
        """End the connections to `peers` with a notice of why the job is broken."""

    @abc.abstractmethod
    def abort(self, error: Exception, notice: str | None = None) -> None:
        """Fail every pending operation with `error` and refuse new ones; with a `notice`, tell every peer."""

    @abc.abstractmethod
    def raise_if_aborted(self) -> None:
        """Raise the abort's error, if the transport was aborted."""

    def message_ring(self, peer: int, sending: bool, nbytes: int):
        """Where a compiled message lane may move messages of `nbytes` to (or from) `peer` itself (engine.py has
        the one transport that offers it); None: every message takes the transport's own path."""
        return None

    # ----- what the board needs to know

    @abc.abstractmethod
    def shares_memory_with(self, ranks: Iterable[int]) -> bool:
        """True when this rank reaches every one of `ranks` through shared memory."""

    @abc.abstractmethod
    def reaches_memory_of(self, ranks: Iterable[int]) -> bool:
        """True when this rank shares memory with every one of `ranks` and all ranks of the host can read and
        write each other's memory: every rank of the host gives the same answer."""

    @property
    @abc.abstractmethod
    def job(self) -> str:
        """The job's name on this host (shared-memory file names start with it)."""

    @property
    @abc.abstractmethod
    def spin_seconds(self) -> float:
        """How long a rank polls before it sleeps in a wait."""

    @abc.abstractmethod
    def close(self) -> None:
        """End every connection; bytes already sent still reach their peers."""

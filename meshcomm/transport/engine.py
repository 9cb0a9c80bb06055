"""The transport: TCP between hosts, shared memory within one, progressed by its callers.

Every rank listens on an ephemeral port and publishes its address in the
store. At start-up each rank connects to every higher rank (a pair has one
connection, opened by its lower rank) while an accept thread answers the
lower ranks, so connecting never depends on what the peer's main thread is
doing. The accept thread keeps running afterwards to turn away strangers.

There is no progress thread: whichever thread waits on a handle drives the
sockets (one at a time, under `_progress_lock`), which keeps small-message
latency to the system calls themselves. Incoming data for which no receive
is posted yet is read into a buffer of its own ("unexpected" messages), so a
rank never stops reading and two ranks sending large messages to each other
at once cannot deadlock.

A shared-memory peer's message whose receive is not posted yet is first left
in the ring for up to `_HOLD_SECONDS`: ranks that drift apart (a root running
ahead into the next broadcast, the next step of a ring arriving during this
step's reduction) would otherwise send every byte through a freshly faulted
buffer and a second copy. The receiver reads past a held message at once when
it waits for something else from that peer (which may sit behind it), and
after the hold in any case, so the guarantee above still stands.

Peers on the same host (transport/local.py) exchange bytes through
shared-memory rings instead; their TCP connection stays open only so that a
peer's death (the kernel closes its sockets) is noticed. A rank with nothing
to do polls the rings briefly, then sleeps on its futex doorbell in slices of
`_POLL_SLICE`, checking the sockets between slices.

A large message to a same-host peer whose rank can read this process's
memory (cma.py; probed at start-up) goes by reference: the ring carries the
header and the buffer's address, the receiver copies the bytes straight from
the sender's buffer into its own (one copy instead of two) and counts the
reference as read in the ring's control page, which completes the send (the
sender looks at that count as it looks at the rings). Until then the sender
keeps the buffer (the send's handle is not done), as it must for any send in
flight. References are read in ring order, so one count says which are done.

With MESHCOMM_TLS_CERT/KEY set (security/tls.py) every connection runs TLS,
then the token handshake inside it. A rank learns which peers share its host
only after connecting (LocalPeers), so the rule is simply every connection;
a same-host peer's connection carries no data when shared memory is on, and
with MESHCOMM_TRANSPORT=tcp its bytes are encrypted too.
"""

from __future__ import annotations

import collections
import os
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from meshcomm.errors import (
    AbortedError,
    AuthenticationError,
    CollectiveMismatchError,
    CommTimeoutError,
    MessageSizeError,
    PeerLostError,
    RendezvousError,
)
from meshcomm import config
from meshcomm.security import auth
from meshcomm.security.tls import Tls, TlsStream
from meshcomm.transport import cma
from meshcomm.transport import header as wire
from meshcomm.transport.handle import Handle
from meshcomm.transport.local import LocalPeers

_RANK = struct.Struct("!I")
_SOCKET_BUFFER = 4 << 20
_POLL_SLICE = 0.05  # seconds one thread may block in select before rechecking deadlines
_MIXED_SLICE = 0.0005  # select slices when both shared-memory and TCP peers may send
_HANDSHAKE_TIMEOUT = 10.0
_HOLD_SECONDS = 0.002  # longest a shared-memory message waits in its ring for its receive
_SOCKET_CHECK_SECONDS = 0.001  # how often a rank with only shared-memory peers looks at their sockets
_REFERENCE = struct.Struct("=Q")  # what a message sent by reference carries: the buffer's address
_BY_REFERENCE_KINDS = (wire.KIND_P2P, wire.KIND_COLLECTIVE, wire.KIND_MAILBOX)


class _PostedRecv:
    __slots__ = ("handle", "peer", "buffer", "fingerprint")

    def __init__(self, handle: Handle, peer: int | None, buffer: memoryview, fingerprint: bytes) -> None:
        self.handle = handle
        self.peer = peer
        self.buffer = buffer
        self.fingerprint = fingerprint


class _Notice(Exception):
    """A peer's notice arrived: the job is broken (it aborted, or lost a rank during a collective)."""

    def __init__(self, head: wire.Header, text: str) -> None:
        super().__init__(text)
        self.reason = head.key.group
        self.peer = head.key.seq if head.key.seq >= 0 else None
        self.text = text

    @classmethod
    def read(cls, head: wire.Header, sock: socket.socket, already: bytes = b"") -> "_Notice":
        """The notice's text follows its header in the same segment; take what is there without blocking."""
        wanted = min(head.nbytes, wire.NOTICE_TEXT_BYTES)
        text = already[:wanted]
        try:
            if len(text) < wanted:
                text += sock.recv(wanted - len(text))
        except OSError:
            pass
        return cls(head, text.decode(errors="replace"))


class _Unexpected:
    """A message that arrived before its receive was posted."""

    __slots__ = ("peer", "header", "data", "complete", "claimed_by")

    def __init__(self, peer: int, header: wire.Header) -> None:
        self.peer = peer
        self.header = header
        self.data = bytearray(header.nbytes)
        self.complete = header.nbytes == 0
        self.claimed_by: _PostedRecv | None = None


@dataclass
class _Inbound:
    """Where the bytes arriving on one connection go next."""

    header_buf: bytearray = field(default_factory=lambda: bytearray(wire.HEADER_BYTES))
    header_got: int = 0
    target: memoryview | None = None  # payload destination while a payload is arriving
    target_got: int = 0
    on_done: object = None  # callable run when the payload is complete
    handle: Handle | None = None  # the posted receive the payload is going into, if any
    held: wire.Header | None = None  # a shared-memory message left in the ring until its receive is posted
    held_until: float = 0.0  # monotonic time after which it is read into an unexpected buffer


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


class _Peer:
    __slots__ = ("rank", "sock", "channel", "shm", "sendq", "inbound", "lost", "writing", "lent", "lent_count")

    def __init__(self, rank: int, sock: socket.socket | TlsStream) -> None:
        self.rank = rank
        self.sock = sock
        self.channel = sock  # where payload bytes go: the socket, or a shared-memory channel
        self.shm = False
        self.sendq: collections.deque = collections.deque()  # [handle, [memoryviews], index]
        self.inbound = _Inbound()
        self.lost: Exception | None = None
        self.writing = False
        # Sends gone by reference and not read yet, oldest first, with how many
        # references to this peer went before them (the count the peer raises).
        self.lent: collections.deque = collections.deque()  # [number, handle, payload]
        self.lent_count = 0


class Transport:
    """Moves tagged byte buffers between the ranks of one job over TCP."""

    def __init__(
        self, rank: int, world_size: int, store, token: bytes, timeout: float, address: str, tls: Tls | None = None
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self._token = token
        self._tls = tls
        self._lock = threading.RLock()  # matching state: posted receives, unexpected messages
        self._progress_lock = threading.Lock()  # one thread drives the sockets at a time
        self._peers: dict[int, _Peer] = {}
        self._posted: dict[wire.Key, list[_PostedRecv]] = collections.defaultdict(list)
        self._unexpected: dict[wire.Key, list[_Unexpected]] = collections.defaultdict(list)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._aborted: Exception | None = None
        self._failed_calls: dict[tuple[int, int], Exception] = {}  # (group, seq) -> why a peer gave it up
        self._listener = socket.create_server((address, 0), backlog=max(world_size, 16))
        self.address = f"{address}:{self._listener.getsockname()[1]}"
        self._accepted: dict[int, socket.socket] = {}
        self._accept_cv = threading.Condition()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="meshcomm-accept", daemon=True)
        self._accept_thread.start()
        self._local: LocalPeers | None = None
        # Per rank, a label shared by the ranks this one reaches through shared memory (the cost model's link classes).
        self.link_labels: tuple[int, ...] = tuple(range(world_size))
        self._shm_peers: list[_Peer] = []
        self._single_copy: float = float("inf")  # smallest message sent by reference
        self._tcp_data = True  # until start-up finds which peers share memory
        self.crowded = False  # this host runs more ranks than it has cores
        self._sockets_seen = 0.0  # when the sockets were last looked at
        try:
            store.set(f"transport/addr/{rank}", self.address)
            self._connect_all(store)
            self._local = LocalPeers(rank, world_size, store, timeout)
            self.host_of = self._local.host_of  # every rank's host index
            for peer, channel in self._local.channels.items():
                state = self._peers[peer]
                state.channel, state.shm = channel, True
                self._shm_peers.append(state)
            self._tcp_data = any(not p.shm for p in self._peers.values())
            if self._local.single_copy_bytes > 0:
                self._single_copy = self._local.single_copy_bytes
            self.link_labels = self._local.link_labels
            self.crowded = len(self._local.ranks) > (os.cpu_count() or 1)
            self._spin = self._spin_seconds(self.crowded)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _spin_seconds(crowded: bool) -> float:
        chosen = config.get_int("MESHCOMM_SPIN_US")
        if chosen is not None:
            return max(chosen, 0) / 1e6
        # With more ranks than cores a spinning rank steals the core its peer
        # needs; measured here, a short poll still beats going straight to the
        # futex, and yielding between polls was slower than either.
        return 10e-6 if crowded else 50e-6

    def _connect_all(self, store) -> None:
        deadline = time.monotonic() + self.timeout
        for peer in range(self.rank + 1, self.world_size):
            address = store.get(f"transport/addr/{peer}", timeout=max(deadline - time.monotonic(), 0.001))
            host, port = address.decode().rsplit(":", 1)
            sock = self._dial(host, int(port), peer, deadline)
            self._adopt(peer, sock)
        with self._accept_cv:
            while len(self._accepted) < self.rank:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(self.rank)) - set(self._accepted))
                    raise RendezvousError(
                        f"rank {self.rank}: data connections from ranks {missing} did not arrive "
                        f"within {self.timeout:.1f} s"
                    )
                self._accept_cv.wait(min(remaining, 0.5))
            accepted = dict(self._accepted)
        for peer, sock in accepted.items():
            self._adopt(peer, sock)

    def _dial(self, host: str, port: int, peer: int, deadline: float) -> socket.socket:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                sock = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.001))
            except OSError as exc:
                last_error = exc
                time.sleep(0.05)
                continue
            try:
                if self._tls is not None:
                    sock = self._tls.handshake(sock, server_side=False, timeout=_HANDSHAKE_TIMEOUT)
                auth.handshake(sock, self._token, b"data", is_server=False, timeout=_HANDSHAKE_TIMEOUT)
                sock.sendall(_RANK.pack(self.rank))
            except AuthenticationError as exc:
                sock.close()
                raise AuthenticationError(f"rank {self.rank}: connection to rank {peer} at {host}:{port}: {exc}") from None
            except OSError:
                sock.close()
                raise
            return sock
        raise RendezvousError(f"rank {self.rank} could not connect to rank {peer} at {host}:{port}: {last_error}")

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            # A handshake may be slow or hostile: answer it off this loop so one
            # silent connection cannot keep real peers waiting.
            threading.Thread(target=self._admit, args=(sock,), daemon=True).start()

    def _admit(self, sock: socket.socket) -> None:
        try:
            if self._tls is not None:
                sock = self._tls.handshake(sock, server_side=True, timeout=_HANDSHAKE_TIMEOUT)
            auth.handshake(sock, self._token, b"data", is_server=True, timeout=_HANDSHAKE_TIMEOUT)
            sock.settimeout(_HANDSHAKE_TIMEOUT)
            raw = b""
            while len(raw) < _RANK.size:
                chunk = sock.recv(_RANK.size - len(raw))
                if not chunk:
                    raise OSError("closed before naming its rank")
                raw += chunk
            (peer,) = _RANK.unpack(raw)
            if not 0 <= peer < self.rank:
                raise OSError(f"claimed rank {peer}, which does not connect to rank {self.rank}")
            with self._accept_cv:
                if peer in self._accepted:
                    raise OSError(f"rank {peer} connected twice")
                self._accepted[peer] = sock
                self._accept_cv.notify_all()
        except (AuthenticationError, OSError, struct.error):
            sock.close()

    def _adopt(self, peer: int, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _probe_when_silent(sock)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
            except OSError:
                pass
        sock.settimeout(None)
        sock.setblocking(False)
        state = _Peer(peer, sock if self._tls is None else TlsStream(sock))
        self._peers[peer] = state
        self._selector.register(state.sock, selectors.EVENT_READ, state)

    # ----- posting operations

    def isend(self, peer: int, payload: memoryview, key: wire.Key, fingerprint: bytes = wire.NO_FINGERPRINT,
              message_bytes: int | None = 0) -> Handle:
        """Queue `payload` (not copied: keep it unchanged until the handle completes) for `peer`.

        `message_bytes`: the whole message when `payload` is one piece of it
        (the single-copy threshold is compared with the whole message, so all
        pieces of a large one go by reference); None: never by reference."""
        handle = Handle("send", peer, len(payload))
        if peer == self.rank:
            self._deliver_local(payload, key, fingerprint)
            handle.complete()
            return handle
        state = self._peer(peer)
        by_reference = (message_bytes is not None and max(payload.nbytes, message_bytes) >= self._single_copy
                        and payload.nbytes and state.shm and key.kind in _BY_REFERENCE_KINDS
                        and state.channel.peer_reads_mine())
        with self._lock:
            self._check_usable(state)
            if by_reference:
                state.lent.append((state.lent_count, handle, payload))  # done once the peer has read it
                state.lent_count += 1
                reference = _REFERENCE.pack(cma.address_of(payload))
                head = wire.pack(key, fingerprint, payload.nbytes, wire.FLAG_BY_REFERENCE)
                state.sendq.append([Handle("send", peer, 0), [memoryview(head + reference)], 0])
            else:
                head = memoryview(wire.pack(key, fingerprint, payload.nbytes))
                state.sendq.append([handle, [head, payload] if payload.nbytes else [head], 0])
        self._try_flush(state)
        return handle

    def irecv(
        self, peer: int | None, buffer: memoryview, key: wire.Key, fingerprint: bytes = wire.NO_FINGERPRINT
    ) -> Handle:
        """Post a receive into `buffer` from `peer` (None: any peer); the handle records the source."""
        handle = Handle("recv", peer, buffer.nbytes)
        posted = _PostedRecv(handle, peer, buffer, fingerprint)
        with self._lock:
            if self._aborted is not None:
                handle.fail(self._aborted)
                return handle
            if self._failed_calls and (key.group, key.seq) in self._failed_calls and key.kind == wire.KIND_COLLECTIVE:
                handle.fail(self._failed_calls[key.group, key.seq])
                return handle
            # Look at what already arrived first: a peer that sent its last
            # message and then left is not an error for that message.
            for message in self._unexpected.get(key, ()):
                if message.claimed_by is None and (peer is None or message.peer == peer):
                    message.claimed_by = posted
                    handle.source = message.peer
                    if message.complete:
                        self._finish_unexpected(key, message)
                    elif self._peers[message.peer].lost is not None:
                        handle.fail(self._peers[message.peer].lost)
                    return handle
            if peer is not None and peer != self.rank:
                self._check_usable(self._peer(peer))
            self._posted[key].append(posted)
        if self._local is not None and any(p.inbound.held is not None for p in self._shm_peers):
            self._local.wake_self()  # a thread sleeping on the doorbell may now take the held message
        return handle

    def take(self, key: wire.Key) -> tuple[int, bytearray] | None:
        """The oldest fully arrived message under `key` that no receive claimed, as (source, payload).

        For senders whose size the receiver cannot know in advance: such
        messages are never posted for, only taken once they are in.
        """
        with self._lock:
            for message in self._unexpected.get(key, ()):
                if message.complete and message.claimed_by is None:
                    self._unexpected[key].remove(message)
                    if not self._unexpected[key]:
                        del self._unexpected[key]
                    return message.peer, message.data
        return None

    def _deliver_local(self, payload: memoryview, key: wire.Key, fingerprint: bytes) -> None:
        head = wire.Header(key, fingerprint, payload.nbytes)
        with self._lock:
            target = self._match(self.rank, head)
            if target is not None:
                if self._accepts(target, self.rank, head):
                    if payload.nbytes:
                        target.buffer[:] = payload
                    target.handle.complete()
                return
            message = _Unexpected(self.rank, head)
            message.data[:] = payload
            message.complete = True
            self._unexpected[key].append(message)

    def _peer(self, peer: int) -> _Peer:
        try:
            return self._peers[peer]
        except KeyError:
            raise ValueError(f"peer must be a rank in [0, {self.world_size}), got {peer}") from None

    def _check_usable(self, state: _Peer) -> None:
        if self._aborted is not None:
            raise self._aborted
        if state.lost is not None:
            raise PeerLostError(f"rank {self.rank}: connection to rank {state.rank} was lost earlier", state.rank)

    # ----- waits outside the message path (a group's board)

    def shares_memory_with(self, ranks) -> bool:
        """True when this rank reaches every one of `ranks` through shared memory."""
        local = self._local
        return local is not None and local.enabled and all(r in local.ranks for r in ranks)

    def reaches_memory_of(self, ranks) -> bool:
        """True when this rank shares memory with every one of `ranks` and all ranks of the host can read and
        write each other's memory (cma.py): every rank of the host gives the same answer."""
        return self.shares_memory_with(ranks) and self._local.all_reach_each_other

    @property
    def job(self) -> str:
        return self._local.job

    @property
    def spin_seconds(self) -> float:
        return self._spin

    def raise_if_aborted(self) -> None:
        if self._aborted is not None:
            raise self._aborted

    def check_call(self, peers: list[int], group: int, seq: int) -> None:
        """Look at the sockets and rings once, then raise what makes waiting for collective
        (group, seq) pointless: the job aborted, a peer lost or giving the call up, or a
        message for it (a peer runs it as messages: another collective or algorithm)."""
        self.progress(0)
        with self._lock:
            if self._aborted is not None:
                raise self._aborted
            failed = self._failed_calls.get((group, seq))
            if failed is not None:
                raise failed
            for peer in peers:
                lost = self._peers[peer].lost
                if lost is not None:
                    raise lost
            for key, messages in self._unexpected.items():
                if key.kind == wire.KIND_COLLECTIVE and key.group == group and key.seq == seq and messages:
                    error = CollectiveMismatchError(
                        f"rank {self.rank} received from rank {messages[0].peer} a message for a collective "
                        f"this rank runs without messages"
                    )
                    error.theirs, error.peer = messages[0].header.fingerprint, messages[0].peer
                    raise error

    # ----- matching

    def _match(self, source: int, head: wire.Header) -> _PostedRecv | None:
        waiting = self._posted.get(head.key)
        if not waiting:
            return None
        for index, posted in enumerate(waiting):
            if posted.peer is None or posted.peer == source:
                del waiting[index]
                if not waiting:
                    del self._posted[head.key]
                posted.handle.source = source
                return posted
        return None

    def _accepts(self, posted: _PostedRecv, source: int, head: wire.Header) -> bool:
        """Check a matched message against what its receiver expects; fail the receive if not."""
        if (
            posted.fingerprint != wire.NO_FINGERPRINT
            and head.fingerprint != wire.NO_FINGERPRINT
            and posted.fingerprint != head.fingerprint
        ):
            error = CollectiveMismatchError(
                f"rank {self.rank} received from rank {source} a message of a different collective"
            )
            error.mine, error.theirs, error.peer = posted.fingerprint, head.fingerprint, source
            posted.handle.fail(error)
            return False
        if head.nbytes != posted.buffer.nbytes:
            error = MessageSizeError(
                f"rank {self.rank}: message of {head.nbytes} bytes from rank {source} "
                f"does not match the receive buffer of {posted.buffer.nbytes} bytes"
            )
            error.mine, error.theirs, error.peer = posted.fingerprint, head.fingerprint, source
            posted.handle.fail(error)
            return False
        return True

    def _finish_unexpected(self, key: wire.Key, message: _Unexpected) -> None:
        self._unexpected[key].remove(message)
        if not self._unexpected[key]:
            del self._unexpected[key]
        posted = message.claimed_by
        if posted is not None and self._accepts(posted, message.peer, message.header):
            if message.header.nbytes:
                posted.buffer[:] = message.data
            posted.handle.complete()

    # ----- progress

    def wait(self, handles: list[Handle], timeout: float | None = None) -> None:
        """Drive the sockets until every handle completes; raise a failure if any did."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        pending = [h for h in handles if not h.done]
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                waiting = ", ".join(f"{h.kind} {'any' if h.peer is None else h.peer}" for h in pending)
                raise CommTimeoutError(f"rank {self.rank}: timed out waiting for: {waiting}")
            if self._progress_lock.acquire(timeout=min(remaining, _POLL_SLICE)):
                try:
                    self._poll(min(remaining, _POLL_SLICE))
                finally:
                    self._progress_lock.release()
            pending = [h for h in pending if not h.done]
        errors = [h.error for h in handles if h.error is not None]
        if errors:
            # What a peer told us (it found a mismatch, it gave up) explains the failure better
            # than a send that then failed because that peer left.
            raise next((e for e in errors if getattr(e, "from_notice", False)), errors[0])

    def progress(self, timeout: float) -> None:
        """One round of socket work, blocking at most `timeout` seconds for something to happen."""
        if self._progress_lock.acquire(timeout=max(timeout, 0)):
            try:
                self._poll(min(timeout, _POLL_SLICE))
            finally:
                self._progress_lock.release()

    def test(self, handle: Handle) -> bool:
        """Make progress without blocking; True when the handle is done."""
        if not handle.done and self._progress_lock.acquire(blocking=False):
            try:
                self._poll(0)
            finally:
                self._progress_lock.release()
        return handle.done

    def _try_flush(self, state: _Peer) -> None:
        if self._progress_lock.acquire(blocking=False):
            try:
                self._write(state)
            finally:
                self._progress_lock.release()
        else:
            self._wake_poller()

    def _wake_poller(self) -> None:
        """Make the thread blocked in select() or on the doorbell look again."""
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass
        if self._local is not None:
            self._local.wake_self()

    def _poll(self, timeout: float) -> None:
        tcp = self._tcp_data
        if tcp:
            for state in self._peers.values():
                if state.sendq and state.lost is None and not state.shm:  # shm peers: in _shm_round
                    self._write(state)
        if self._shm_peers:
            if self._shm_round():
                timeout = 0.0
            elif timeout > 0 and self._spin_until_ready():
                self._shm_round()
                timeout = 0.0
            elif timeout > 0 and not self._tcp_data:
                # Only shared-memory peers can bring work: sleep on the doorbell,
                # then look at the sockets (for lost peers) without blocking.
                self._local.sleep(min(timeout, self._until_hold_ends()), self._shm_ready)
                self._shm_round()
                timeout = 0.0
            elif timeout > 0:
                # Both kinds of peer: the sockets cannot wake a futex sleeper, so
                # wait in select in short slices and look at the rings between them.
                timeout = min(timeout, _MIXED_SLICE)
        if not tcp:
            # Only shared-memory peers: their sockets just say who left, which
            # can wait a millisecond; a system call on every poll cannot.
            now = time.monotonic()
            if timeout == 0 and now - self._sockets_seen < _SOCKET_CHECK_SECONDS:
                return
            self._sockets_seen = now
        for state in self._peers.values():
            wants_write = bool(state.sendq) and state.lost is None and not state.shm
            if state.lost is None and state.writing != wants_write:
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if wants_write else 0)
                self._selector.modify(state.sock, events, state)
                state.writing = wants_write
        for selector_key, events in self._selector.select(timeout):
            state = selector_key.data
            if state is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                continue
            if state.shm:
                self._check_alive(state)
                continue
            if events & selectors.EVENT_READ:
                self._read(state)
            if events & selectors.EVENT_WRITE and state.lost is None:
                self._write(state)

    def _shm_round(self) -> bool:
        """Move what the rings allow without blocking; True if any bytes moved."""
        moved = False
        for state in self._shm_peers:
            if state.lost is None:
                if state.sendq and self._write(state):
                    moved = True
                if self._read(state):
                    moved = True
                if state.lent and self._returned(state):
                    moved = True
        return moved

    def _shm_ready(self) -> bool:
        for state in self._shm_peers:
            if state.lost is not None:
                continue
            if state.sendq and state.channel.writable():
                return True
            if state.lent and state.channel.references_read() > state.lent[0][0]:
                return True
            if state.inbound.held is not None:
                if self._may_release(state, state.inbound.held):
                    return True
            elif state.channel.readable():
                return True
        return self._aborted is not None

    def _until_hold_ends(self) -> float:
        ends = [p.inbound.held_until for p in self._shm_peers if p.inbound.held is not None]
        return max(min(ends) - time.monotonic(), 0.0) if ends else _POLL_SLICE

    def _may_release(self, state: _Peer, head: wire.Header) -> bool:
        """A held message is read on once its receive is posted, once the receiver
        waits for anything else from that peer, or once the hold is over."""
        if time.monotonic() >= state.inbound.held_until:
            return True
        with self._lock:
            if self._posted.get(head.key):
                return True
            return any(
                posted.peer is None or posted.peer == state.rank
                for waiting in self._posted.values()
                for posted in waiting
            )

    def _spin_until_ready(self) -> bool:
        if self._spin <= 0:
            return False
        end = time.perf_counter() + self._spin
        ready = self._shm_ready
        while time.perf_counter() < end:
            if ready():
                return True
        return False

    def _check_alive(self, state: _Peer) -> None:
        """A shared-memory peer's socket carries no data: readable means it closed."""
        try:
            data = state.sock.recv(1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._read(state, drain=True)  # keep what it wrote before it went, held messages too
            self._lose(state, exc)
            return
        self._read(state, drain=True)
        notice = None
        if data:
            try:
                data += state.sock.recv(wire.HEADER_BYTES - 1)
                head = wire.unpack(data[: wire.HEADER_BYTES])
                if head.key.kind == wire.KIND_NOTICE:
                    notice = _Notice.read(head, state.sock)
            except (OSError, ValueError, struct.error):
                pass
        self._lose(state, notice or (None if not data else OSError("unexpected bytes on a shared-memory peer's socket")))

    def _write(self, state: _Peer) -> bool:
        """Send what the channel takes now; True if any bytes went."""
        moved = False
        while state.sendq:
            with self._lock:
                if not state.sendq:
                    return moved
                entry = state.sendq[0]
            handle, views, index = entry
            try:
                sent = state.channel.sendmsg(views[index:])
            except (BlockingIOError, InterruptedError):
                return moved
            except OSError as exc:
                self._lose(state, exc)
                return moved
            wrote = sent > 0
            moved = moved or wrote
            while sent and index < len(views):
                if sent >= views[index].nbytes:
                    sent -= views[index].nbytes
                    index += 1
                else:
                    views[index] = views[index][sent:]
                    sent = 0
            entry[2] = index
            if index < len(views):
                if state.shm and wrote:
                    continue  # a ring takes a part per call: offer the next (a full ring says so)
                return moved
            with self._lock:
                state.sendq.popleft()
            handle.complete()
        return moved

    def _read(self, state: _Peer, drain: bool = False) -> bool:
        """Take in what the channel holds now; True if any bytes came. A message
        with no receive posted may stay in a shared-memory ring, unless `drain`.

        A socket is read until it would block (or is lost), never less: a TLS
        channel may hold decrypted bytes that select() will not report again."""
        inbound = state.inbound
        moved = False
        while state.lost is None:
            if inbound.held is not None:
                head = inbound.held
                if not (drain or self._may_release(state, head)):
                    return moved
                inbound.held = None
                self._begin_payload(state, head)
                moved = True
                continue
            try:
                if inbound.target is None:
                    got = state.channel.recv_into(memoryview(inbound.header_buf)[inbound.header_got :])
                else:
                    got = state.channel.recv_into(inbound.target[inbound.target_got :])
            except (BlockingIOError, InterruptedError):
                return moved
            except OSError as exc:
                self._lose(state, exc)
                return moved
            if got == 0:
                self._lose(state, None)
                return moved
            moved = True
            if inbound.target is None:
                inbound.header_got += got
                if inbound.header_got == wire.HEADER_BYTES:
                    inbound.header_got = 0
                    try:
                        head = wire.unpack(inbound.header_buf)
                    except ValueError as exc:
                        self._lose(state, exc)
                        return moved
                    if head.key.kind == wire.KIND_NOTICE:
                        self._lose(state, _Notice.read(head, state.sock))
                        return moved
                    if state.shm and not drain and head.key.kind != wire.KIND_MAILBOX:
                        inbound.held, inbound.held_until = head, time.monotonic() + _HOLD_SECONDS
                        continue  # taken on at once when its receive is already posted
                    self._begin_payload(state, head)
            else:
                inbound.target_got += got
                if inbound.target_got == inbound.target.nbytes:
                    self._end_payload(state)

    def _begin_payload(self, state: _Peer, head: wire.Header) -> None:
        inbound = state.inbound
        if head.key.kind == wire.KIND_CALL_FAILED:
            self._begin_call_failed(state, head)
            return
        if head.flags & wire.FLAG_BY_REFERENCE and not state.shm:
            self._lose(state, ValueError("a message by reference from a rank on another host"))
            return
        with self._lock:
            posted = self._match(state.rank, head)
            if posted is not None and not self._accepts(posted, state.rank, head):
                posted = None
                sink = _Unexpected(state.rank, head)  # read and drop the payload
                done = lambda: None  # noqa: E731
                target = memoryview(sink.data)
            elif posted is not None:
                target = posted.buffer
                done = posted.handle.complete
            else:
                message = _Unexpected(state.rank, head)
                self._unexpected[head.key].append(message)
                target = memoryview(message.data)

                def done(message=message, key=head.key) -> None:
                    with self._lock:
                        message.complete = True
                        if message.claimed_by is not None:
                            self._finish_unexpected(key, message)

        receive = posted.handle if posted is not None else None
        if head.flags & wire.FLAG_BY_REFERENCE:
            inbound.handle = receive
            self._begin_reference(state, target, done, receive)
            return
        if head.nbytes == 0:
            done()
            return
        inbound.target, inbound.target_got, inbound.on_done = target, 0, done
        inbound.handle = receive

    def _begin_reference(self, state: _Peer, target: memoryview, done, receive: Handle | None) -> None:
        """The message's bytes are in the sender's memory: read its reference, then copy them into `target`.

        A sender that died took the bytes with it: the peer is lost, and the
        posted `receive` the bytes were meant for fails with it."""
        reference = bytearray(_REFERENCE.size)

        def fetch() -> None:
            (address,) = _REFERENCE.unpack(reference)
            try:
                cma.read(state.channel.peer_pid, address, target)
            except OSError as exc:
                self._lose(state, OSError(f"could not read a message from its memory: {exc}"))
                if receive is not None:
                    receive.fail(state.lost)
                return
            state.channel.count_reference_read()
            done()

        state.inbound.target, state.inbound.target_got, state.inbound.on_done = memoryview(reference), 0, fetch

    def _returned(self, state: _Peer) -> bool:
        """Complete the sends by reference the peer has read; True if any."""
        read = state.channel.references_read()
        if state.lent[0][0] >= read:
            return False
        with self._lock:
            while state.lent and state.lent[0][0] < read:
                state.lent.popleft()[1].complete()
        return True

    def _begin_call_failed(self, state: _Peer, head: wire.Header) -> None:
        if head.nbytes > wire.NOTICE_TEXT_BYTES:
            self._lose(state, ValueError(f"a call-failed message of {head.nbytes} bytes"))
            return
        text = bytearray(head.nbytes)

        def done() -> None:
            self._call_failed(state.rank, head.key, text.decode(errors="replace"))

        if not text:
            done()
            return
        state.inbound.target, state.inbound.target_got, state.inbound.on_done = memoryview(text), 0, done

    def _call_failed(self, sender: int, key: wire.Key, text: str) -> None:
        """A peer gave up collective (group, seq): fail this rank's part of it, now and when posted later."""
        if key.step == wire.NOTICE_TIMEOUT:
            error: Exception = CommTimeoutError(f"rank {self.rank}: rank {sender} gave up on this collective: {text}")
        else:
            error = CollectiveMismatchError(f"rank {self.rank}: rank {sender} found a {text}")
        error.from_notice = True
        with self._lock:
            self._failed_calls[key.group, key.seq] = error
            for waiting_key in [k for k in self._posted if k.kind == wire.KIND_COLLECTIVE
                                and k.group == key.group and k.seq == key.seq]:
                for posted in self._posted.pop(waiting_key):
                    posted.handle.fail(error)

    def fail_call(self, peers: list[int], group: int, seq: int, reason: int, text: str) -> None:
        """Tell `peers` that collective (group, seq) failed here (reason NOTICE_MISMATCH or NOTICE_TIMEOUT),
        so they stop waiting for it; the connections stay usable for later collectives."""
        body = memoryview(text.encode(errors="replace")[: wire.NOTICE_TEXT_BYTES])
        key = wire.Key(wire.KIND_CALL_FAILED, group, seq, reason)
        handles = []
        for peer in peers:
            try:
                handles.append(self.isend(peer, body, key))
            except (PeerLostError, AbortedError, ValueError):
                pass
        try:
            self.wait(handles, timeout=1.0)  # bounded: a peer that cannot take it is failing anyway
        except Exception:
            pass

    def _end_payload(self, state: _Peer) -> None:
        inbound = state.inbound
        done = inbound.on_done
        inbound.target, inbound.target_got, inbound.on_done, inbound.handle = None, 0, None, None
        done()

    def _lose(self, state: _Peer, exc: Exception | None) -> None:
        """A connection broke: fail everything that needed that peer."""
        reason = f": {exc}" if exc else ""
        if isinstance(exc, _Notice):
            error = _notice_error(self.rank, state.rank, exc)
        else:
            error = PeerLostError(f"rank {self.rank}: connection to rank {state.rank} closed{reason}", state.rank)
        with self._lock:
            if state.lost is not None:
                return
            state.lost = error
            try:
                self._selector.unregister(state.sock)
            except (KeyError, ValueError):
                pass
            state.sock.close()
            for entry in state.sendq:
                entry[0].fail(error)
            state.sendq.clear()
            for _, handle, _ in state.lent:
                handle.fail(error)
            state.lent.clear()
            for key in list(self._posted):
                keep = []
                for posted in self._posted[key]:
                    if posted.peer == state.rank:
                        posted.handle.fail(error)
                    else:
                        keep.append(posted)
                if keep:
                    self._posted[key] = keep
                else:
                    del self._posted[key]
            for messages in self._unexpected.values():
                for message in messages:
                    if message.peer == state.rank and not message.complete and message.claimed_by is not None:
                        message.claimed_by.handle.fail(error)
            if state.inbound.handle is not None:
                # A payload was half-read straight into a posted receive.
                state.inbound.handle.fail(error)
        if isinstance(exc, _Notice) and self._aborted is None:
            self.abort(error)  # a broken job fails everything here, not just what involved that peer

    def abort(self, error: Exception, notice: str | None = None) -> None:
        """Fail every pending operation with `error` and refuse new ones; with a `notice` (the
        reason, may be ""), end every connection with an abort notice so peers fail theirs at once."""
        with self._lock:
            self._aborted = error
            for waiting in self._posted.values():
                for posted in waiting:
                    posted.handle.fail(error)
            self._posted.clear()
            for state in self._peers.values():
                for entry in state.sendq:
                    entry[0].fail(error)
                for _, handle, _ in state.lent:
                    handle.fail(error)
        self._wake_poller()
        if notice is not None:
            self.tell_peers(list(self._peers), wire.NOTICE_ABORT, None, notice)

    def tell_peers(self, peers: list[int], reason: int, peer: int | None, text: str) -> None:
        """End the connections to `peers` with a notice of why the job is broken (header.notice)."""
        if not self._progress_lock.acquire(timeout=1.0):
            return
        try:
            for rank in peers:
                state = self._peers.get(rank)
                if state is not None and rank != peer:
                    self._send_notice(state, wire.notice(reason, peer, text))
        finally:
            self._progress_lock.release()

    def _send_notice(self, state: _Peer, notice: bytes) -> None:
        # On a TCP peer the notice goes where a header is due; after a half-sent
        # message it would be read as payload, so that peer just sees us leave.
        head = state.sendq[0] if state.sendq else None
        half_sent = not state.shm and head is not None and (head[2] > 0 or head[1][0].nbytes != wire.HEADER_BYTES)
        # A TLS write that blocked part-way owes the rest of its bytes before any other.
        owes = isinstance(state.sock, TlsStream) and state.sock.mid_write
        if state.lost is not None or half_sent or owes:
            return
        try:
            state.sock.send(notice)
        except OSError:
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._progress_lock:
            for state in self._peers.values():
                if state.lost is None:
                    try:
                        self._selector.unregister(state.sock)
                    except (KeyError, ValueError):
                        pass
                    # FIN rather than RST: bytes we sent that the peer has not
                    # read yet must still reach it after we are gone.
                    try:
                        state.sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    state.sock.close()
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()
            if self._local is not None:
                self._local.close()
        with self._accept_cv:
            for sock in self._accepted.values():
                if sock.fileno() != -1 and all(p.sock is not sock for p in self._peers.values()):
                    sock.close()
        self._accept_thread.join(timeout=2)



def _notice_error(rank: int, sender: int, notice: _Notice) -> Exception:
    """The error a peer's notice stands for; `from_notice` tells the runtime not to pass it on again."""
    if notice.reason == wire.NOTICE_ABORT:
        error: Exception = AbortedError(f"rank {rank}: rank {sender} called abort()" + (f": {notice.text}" if notice.text else ""))
    else:
        error = PeerLostError(f"rank {rank}: rank {notice.peer} was lost (rank {sender} lost its connection to it "
                              "and told this rank)", notice.peer)
    error.from_notice = True
    return error

"""SocketTransport: the job's connections (TCP, and shared-memory rings on one host), progressed by its callers.

There is no progress thread: whichever thread waits on a handle drives the
connections (one at a time, under `_progress_lock`), which keeps
small-message latency to the system calls themselves. The pieces it drives
live beside it: tcp.py opens the connections, peer.py frames the messages
on each, matching.py pairs arrivals with receives, notices.py turns a
peer's failure notice into an error.

Peers on the same host (local.py) exchange bytes through shared-memory
rings instead of their sockets. A rank with nothing to do polls the rings
briefly, then sleeps on its futex doorbell in slices of `_POLL_SLICE`,
checking the sockets between slices.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import threading
import time

from meshcomm import config
from meshcomm.errors import AbortedError, CollectiveMismatchError, CommTimeoutError, PeerLostError, RevokedError
from meshcomm.security.tls import Tls
from meshcomm.transport import cma
from meshcomm.transport import header as wire
from meshcomm.transport import shm
from meshcomm.transport import tcp
from meshcomm.transport.handle import Handle
from meshcomm.transport.interface import Transport
from meshcomm.transport.local import LocalPeers
from meshcomm.transport.matching import Matcher, PostedRecv
from meshcomm.transport.notices import Notice, call_failed_error, notice_error
from meshcomm.transport.peer import REFERENCE, Peer

_POLL_SLICE = 0.05  # seconds one thread may block in select before rechecking deadlines
_MIXED_SLICE = 0.0005  # select slices when both shared-memory and TCP peers may send
_SOCKET_CHECK_SECONDS = 0.001  # how often a rank with only shared-memory peers looks at their sockets
_BY_REFERENCE_KINDS = (wire.KIND_P2P, wire.KIND_COLLECTIVE, wire.KIND_MAILBOX)
# Sends, through meshcomm's API or the MPI face: below shm.SHORT_PARTS_BELOW they stream in short parts.
_SEND_KINDS = (wire.KIND_P2P, wire.KIND_MAILBOX)


class SocketTransport(Transport):
    """Moves tagged byte buffers between the ranks of one job: TCP between hosts, shared memory within one."""

    def __init__(
        self, rank: int, world_size: int, store, token: bytes, timeout: float, address: str, tls: Tls | None = None
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self._token = token
        self._tls = tls
        self.matcher = Matcher(rank)
        self.revoked_groups = self.matcher.revoked
        self._lock = self.matcher.lock  # matching state, send queues, lent buffers
        self._progress_lock = threading.Lock()  # one thread drives the connections at a time
        self._peers: dict[int, Peer] = {}
        self._silent: set[int] = set()  # peers whose host stopped answering (see lose)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self.aborted: Exception | None = None
        self._listener = tcp.Listener(rank, world_size, address, token, tls)
        self.address = self._listener.address
        self._local: LocalPeers | None = None
        self.link_labels: tuple[int, ...] = tuple(range(world_size))
        self._shm_peers: list[Peer] = []
        self._single_copy: float = float("inf")  # smallest message sent by reference
        self._p2p_single_copy: float = float("inf")  # the same for send/recv
        self._tcp_data = True  # until start-up finds which peers share memory
        self.crowded = False
        self._sockets_seen = 0.0  # when the sockets were last looked at
        try:
            store.set(f"transport/addr/{rank}", self.address)
            self._connect_all(store)
            self._local = LocalPeers(rank, world_size, store, timeout)
            self.host_of = self._local.host_of
            for peer, channel in self._local.channels.items():
                state = self._peers[peer]
                state.use_rings(channel)
                self._shm_peers.append(state)
            self._tcp_data = any(not p.shm for p in self._peers.values())
            if self._local.single_copy_bytes > 0:
                self._single_copy = self._local.single_copy_bytes
            self.link_labels = self._local.link_labels
            self.crowded = len(self._local.ranks) > (os.cpu_count() or 1)
            # Two copies at once, in and out of the ring, beat one process_vm_readv below several MiB, when
            # both ranks have a core (docs/transports.md).
            streamed = 0 if self.crowded else self._local.stream_bytes
            self._p2p_single_copy = max(self._single_copy, streamed)
            self._spin = self._spin_seconds(self.crowded)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _spin_seconds(crowded: bool) -> float:
        chosen = config.get_int("MESHCOMM_SPIN_US")
        if chosen is not None:
            return max(chosen, 0) / 1e6
        # With more ranks than cores a spinning rank steals the core its peer needs: poll briefly, then sleep.
        return 10e-6 if crowded else 50e-6

    def _connect_all(self, store) -> None:
        deadline = time.monotonic() + self.timeout
        for peer in range(self.rank + 1, self.world_size):
            address = store.get(f"transport/addr/{peer}", timeout=max(deadline - time.monotonic(), 0.001))
            host, port = address.decode().rsplit(":", 1)
            self._adopt(peer, tcp.dial(self.rank, peer, host, int(port), self._token, self._tls, deadline))
        for peer, sock in self._listener.accepted(deadline, self.timeout).items():
            self._adopt(peer, sock)

    def _adopt(self, peer: int, sock: socket.socket) -> None:
        state = Peer(peer, tcp.data_socket(sock, self._tls), self)
        self._peers[peer] = state
        self._selector.register(state.sock, selectors.EVENT_READ, state)

    # ----- posting operations

    def isend(self, peer: int, payload: memoryview, key: wire.Key, fingerprint: bytes = wire.NO_FINGERPRINT,
              message_bytes: int | None = 0) -> Handle:
        handle = Handle("send", peer, len(payload))
        if peer == self.rank:
            self._deliver_local(payload, key, fingerprint)
            handle.complete()
            return handle
        state = self._peer(peer)
        single_copy = self._p2p_single_copy if key.kind == wire.KIND_P2P else self._single_copy
        by_reference = (message_bytes is not None and max(payload.nbytes, message_bytes) >= single_copy
                        and payload.nbytes and state.shm and key.kind in _BY_REFERENCE_KINDS
                        and state.channel.peer_reads_mine())
        with self._lock:
            self._check_usable(state)
            if self.matcher.revoked and (revoked := self.matcher.revoked_error(key)) is not None:
                raise revoked
            if by_reference:
                state.lent.append((state.lent_count, handle, payload))  # done once the peer has read it
                state.lent_count += 1
                reference = REFERENCE.pack(cma.address_of(payload))
                head = wire.pack(key, fingerprint, payload.nbytes, wire.FLAG_BY_REFERENCE)
                state.sendq.append([Handle("send", peer, 0), [memoryview(head + reference)], 0, False])
            else:
                head = memoryview(wire.pack(key, fingerprint, payload.nbytes))
                short_parts = key.kind in _SEND_KINDS and payload.nbytes < shm.SHORT_PARTS_BELOW
                state.sendq.append([handle, [head, payload] if payload.nbytes else [head], 0, short_parts])
        self._try_flush(state)
        return handle

    def irecv(
        self, peer: int | None, buffer: memoryview, key: wire.Key, fingerprint: bytes = wire.NO_FINGERPRINT
    ) -> Handle:
        handle = Handle("recv", peer, buffer.nbytes)
        posted = PostedRecv(handle, peer, buffer, fingerprint)
        matcher = self.matcher
        with self._lock:
            if self.aborted is not None:
                handle.fail(self.aborted)
                return handle
            if matcher.revoked and (revoked := matcher.revoked_error(key)) is not None:
                handle.fail(revoked)
                return handle
            if matcher.failed_calls and key.kind == wire.KIND_COLLECTIVE and (key.group, key.seq) in matcher.failed_calls:
                handle.fail(matcher.failed_calls[key.group, key.seq])
                return handle
            # Look at what already arrived first: a peer that sent its last
            # message and then left is not an error for that message.
            message = matcher.claim(key, peer, posted)
            if message is not None:
                if message.complete:
                    matcher.finish_unexpected(key, message)
                elif self._peers[message.peer].lost is not None:
                    handle.fail(self._peers[message.peer].lost)
                return handle
            if peer is not None and peer != self.rank:
                self._check_usable(self._peer(peer))
            matcher.posted[key].append(posted)
        if self._local is not None and any(p.inbound.held is not None for p in self._shm_peers):
            self._local.wake_self()  # a thread sleeping on the doorbell may now take the held message
        return handle

    def take(self, key: wire.Key) -> tuple[int, bytearray] | None:
        """For senders whose size the receiver cannot know in advance: such
        messages are never posted for, only taken once they are in."""
        with self._lock:
            return self.matcher.take(key)

    def _deliver_local(self, payload: memoryview, key: wire.Key, fingerprint: bytes) -> None:
        head = wire.Header(key, fingerprint, payload.nbytes)
        matcher = self.matcher
        with self._lock:
            target = matcher.match(self.rank, head)
            if target is not None:
                if matcher.accepts(target, self.rank, head):
                    if payload.nbytes:
                        target.buffer[:] = payload
                    target.handle.complete()
                return
            message = matcher.keep_unexpected(self.rank, head)
            message.data[:] = payload
            message.complete = True

    def _peer(self, peer: int) -> Peer:
        try:
            return self._peers[peer]
        except KeyError:
            raise ValueError(f"peer must be a rank in [0, {self.world_size}), got {peer}") from None

    def _check_usable(self, state: Peer) -> None:
        if self.aborted is not None:
            raise self.aborted
        if state.lost is not None:
            raise PeerLostError(f"rank {self.rank}: connection to rank {state.rank} was lost earlier", state.rank)

    def message_ring(self, peer: int, sending: bool, nbytes: int):
        """For a compiled message lane (native/rings.c): `(ring mapping, ring start, ring bytes, doorbell mapping,
        Peer)` when messages of `nbytes` to (or from) `peer` go whole, by value, through a shared-memory ring;
        else None."""
        state = self._peers.get(peer)
        if state is None or not state.shm or state.lost is not None or self.aborted is not None:
            return None
        if nbytes >= self._p2p_single_copy or nbytes + wire.HEADER_BYTES > state.channel.part_bytes:
            return None
        return (*state.channel.frame_parts(sending), state)

    # ----- what the board needs to know

    def shares_memory_with(self, ranks) -> bool:
        local = self._local
        return local is not None and local.enabled and all(r in local.ranks for r in ranks)

    def reaches_memory_of(self, ranks) -> bool:
        return self.shares_memory_with(ranks) and self._local.all_reach_each_other

    @property
    def job(self) -> str:
        return self._local.job

    @property
    def spin_seconds(self) -> float:
        return self._spin

    def raise_if_aborted(self) -> None:
        if self.aborted is not None:
            raise self.aborted

    def check_call(self, peers: list[int], group: int, seq: int) -> None:
        """Look at the connections once, then raise what makes waiting for collective (group, seq) pointless."""
        self.progress(0)
        with self._lock:
            if self.aborted is not None:
                raise self.aborted
            failed = self.matcher.revoked.get(group) or self.matcher.failed_calls.get((group, seq))
            if failed is not None:
                raise failed
            for peer in peers:
                lost = self._peers[peer].lost
                if lost is not None:
                    raise lost
            message = self.matcher.first_message_of_call(group, seq)
            if message is not None:
                error = CollectiveMismatchError(
                    f"rank {self.rank} received from rank {message.peer} a message for a collective "
                    f"this rank runs without messages"
                )
                error.theirs, error.peer = message.header.fingerprint, message.peer
                raise error

    # ----- progress

    def wait(self, handles: list[Handle], timeout: float | None = None) -> None:
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
        if self._progress_lock.acquire(timeout=max(timeout, 0)):
            try:
                self._poll(min(timeout, _POLL_SLICE))
            finally:
                self._progress_lock.release()

    def test(self, handle: Handle) -> bool:
        if not handle.done and self._progress_lock.acquire(blocking=False):
            try:
                self._poll(0)
            finally:
                self._progress_lock.release()
        return handle.done

    def _try_flush(self, state: Peer) -> None:
        if self._progress_lock.acquire(blocking=False):
            try:
                state.write()
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
        tcp_data = self._tcp_data
        if tcp_data:
            for state in self._peers.values():
                if state.sendq and state.lost is None and not state.shm:  # shm peers: in _shm_round
                    state.write()
        if self._shm_peers:
            if self._shm_round():
                timeout = 0.0
            elif timeout > 0 and self._spin_until_ready():
                self._shm_round()
                timeout = 0.0
            elif timeout > 0 and not tcp_data:
                # Only shared-memory peers can bring work: sleep on the doorbell,
                # then look at the sockets (for lost peers) without blocking.
                self._local.sleep(min(timeout, self._until_hold_ends()), self._shm_ready)
                self._shm_round()
                timeout = 0.0
            elif timeout > 0:
                # Both kinds of peer: the sockets cannot wake a futex sleeper, so
                # wait in select in short slices and look at the rings between them.
                timeout = min(timeout, _MIXED_SLICE)
        if not tcp_data:
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
                state.check_alive()
                continue
            if events & selectors.EVENT_READ:
                state.read()
            if events & selectors.EVENT_WRITE and state.lost is None:
                state.write()

    def _shm_round(self) -> bool:
        """Move what the rings allow without blocking; True if any bytes moved."""
        moved = False
        for state in self._shm_peers:
            if state.lost is None:
                if state.sendq and state.write():
                    moved = True
                if state.read():
                    moved = True
                if state.lent and state.returned():
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
                if self.may_release(state, state.inbound.held):
                    return True
            elif state.channel.readable():
                return True
        return self.aborted is not None

    def _until_hold_ends(self) -> float:
        ends = [p.inbound.held_until for p in self._shm_peers if p.inbound.held is not None]
        return max(min(ends) - time.monotonic(), 0.0) if ends else _POLL_SLICE

    def may_release(self, state: Peer, head: wire.Header) -> bool:
        """A held message is read on once its receive is posted, once the receiver
        waits for anything else from that peer, or once the hold is over."""
        if time.monotonic() >= state.inbound.held_until:
            return True
        with self._lock:
            return self.matcher.waits_for(state.rank, head.key)

    def _spin_until_ready(self) -> bool:
        if self._spin <= 0:
            return False
        end = time.perf_counter() + self._spin
        ready = self._shm_ready
        while time.perf_counter() < end:
            if ready():
                return True
        return False

    # ----- failures

    def call_failed(self, sender: int, key: wire.Key, text: str) -> None:
        """A peer gave up collective (group, seq): fail this rank's part of it, now and when posted later."""
        error = call_failed_error(self.rank, sender, key, text)
        with self._lock:
            if key.step == wire.NOTICE_REVOKE:
                self.matcher.revoke(key.group, error)
            else:
                self.matcher.fail_call(key.group, key.seq, error)

    def fail_call(self, peers: list[int], group: int, seq: int, reason: int, text: str) -> None:
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

    def revoke(self, peers: list[int], group: int, text: str) -> None:
        error = RevokedError(f"rank {self.rank}: group {group} was revoked here" + (f": {text}" if text else ""))
        with self._lock:
            self.matcher.revoke(group, error)
        self._wake_poller()
        self.fail_call(peers, group, -1, wire.NOTICE_REVOKE, text)

    def silent_peers(self) -> set[int]:
        return set(self._silent)

    def lost(self, peer: int) -> Exception | None:
        return None if peer == self.rank else self._peers[peer].lost

    def lose(self, state: Peer, exc: Exception | None) -> None:
        """A connection broke: fail everything that needed that peer."""
        reason = f": {exc}" if exc else ""
        if isinstance(exc, Notice):
            error = notice_error(self.rank, state.rank, exc)
        else:
            error = PeerLostError(f"rank {self.rank}: connection to rank {state.rank} closed{reason}", state.rank)
        with self._lock:
            if state.lost is not None:
                return
            state.lost = error
            if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
                self._silent.add(state.rank)  # the kernel gave up on its host (tcp._probe_when_silent)
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
            self.matcher.fail_from(state.rank, error)
            if state.inbound.handle is not None:
                # A payload was half-read straight into a posted receive.
                state.inbound.handle.fail(error)
        if isinstance(exc, Notice) and self.aborted is None:
            self.abort(error)  # a broken job fails everything here, not just what involved that peer

    def abort(self, error: Exception, notice: str | None = None) -> None:
        with self._lock:
            self.aborted = error
            self.matcher.fail_all(error)
            for state in self._peers.values():
                for entry in state.sendq:
                    entry[0].fail(error)
                for _, handle, _ in state.lent:
                    handle.fail(error)
        self._wake_poller()
        if notice is not None:
            self.tell_peers(list(self._peers), wire.NOTICE_ABORT, None, notice)

    def tell_peers(self, peers: list[int], reason: int, peer: int | None, text: str) -> None:
        if not self._progress_lock.acquire(timeout=1.0):
            return
        try:
            for rank in peers:
                state = self._peers.get(rank)
                if state is not None and rank != peer:
                    state.send_notice(wire.notice(reason, peer, text))
        finally:
            self._progress_lock.release()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._listener.close(keep=[p.sock for p in self._peers.values()])
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

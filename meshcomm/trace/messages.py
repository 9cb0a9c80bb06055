"""A transport wrapper that records every message a rank sends or receives.

It is put in front of the real transport only when tracing is on, so the
untraced path does not pay for it. A message's event starts when it is posted
and ends when the rank first sees its handle done (the transport is asked
after every call that can make progress).
"""

from __future__ import annotations

import threading

from meshcomm.trace.writer import TraceWriter
from meshcomm.transport.handle import Handle
from meshcomm.transport.header import KIND_COLLECTIVE, KIND_MAILBOX, KIND_P2P, NO_FINGERPRINT, Key
from meshcomm.transport.interface import Transport

_KINDS = {KIND_P2P: "p2p", KIND_COLLECTIVE: "collective", KIND_MAILBOX: "mpi"}


class TracedTransport(Transport):
    """`transport`, with an event written for every message it completes."""

    def __init__(self, transport: Transport, writer: TraceWriter) -> None:
        self._transport = transport
        self._writer = writer
        self._local = threading.local()  # each thread records the handles it posted
        self.rank, self.world_size, self.timeout = transport.rank, transport.world_size, transport.timeout
        self.host_of, self.link_labels, self.crowded = transport.host_of, transport.link_labels, transport.crowded
        self.revoked_groups = transport.revoked_groups

    def isend(self, peer: int, payload: memoryview, key: Key, fingerprint: bytes = NO_FINGERPRINT,
              message_bytes: int | None = 0) -> Handle:
        posted = self._writer.now()
        handle = self._transport.isend(peer, payload, key, fingerprint, message_bytes)
        self._pending().append((handle, key, posted))
        self._sweep()
        return handle

    def irecv(self, peer: int | None, buffer: memoryview, key: Key, fingerprint: bytes = NO_FINGERPRINT) -> Handle:
        posted = self._writer.now()
        handle = self._transport.irecv(peer, buffer, key, fingerprint)
        self._pending().append((handle, key, posted))
        self._sweep()
        return handle

    def take(self, key: Key) -> tuple[int, bytearray] | None:
        return self._transport.take(key)

    def wait(self, handles: list[Handle], timeout: float | None = None) -> None:
        try:
            self._transport.wait(handles, timeout)
        finally:
            self._sweep()

    def progress(self, timeout: float) -> None:
        self._transport.progress(timeout)
        self._sweep()

    def test(self, handle: Handle) -> bool:
        done = self._transport.test(handle)
        self._sweep()
        return done

    # ----- untraced: passed to the wrapped transport

    def check_call(self, peers: list[int], group: int, seq: int) -> None:
        self._transport.check_call(peers, group, seq)

    def fail_call(self, peers: list[int], group: int, seq: int, reason: int, text: str) -> None:
        self._transport.fail_call(peers, group, seq, reason, text)

    def revoke(self, peers: list[int], group: int, text: str) -> None:
        self._transport.revoke(peers, group, text)

    def silent_peers(self) -> set[int]:
        return self._transport.silent_peers()

    def lost(self, peer: int) -> Exception | None:
        return self._transport.lost(peer)

    def tell_peers(self, peers: list[int], reason: int, peer: int | None, text: str) -> None:
        self._transport.tell_peers(peers, reason, peer, text)

    def abort(self, error: Exception, notice: str | None = None) -> None:
        self._transport.abort(error, notice)

    def raise_if_aborted(self) -> None:
        self._transport.raise_if_aborted()

    def shares_memory_with(self, ranks) -> bool:
        return self._transport.shares_memory_with(ranks)

    def reaches_memory_of(self, ranks) -> bool:
        return self._transport.reaches_memory_of(ranks)

    @property
    def job(self) -> str:
        return self._transport.job

    @property
    def spin_seconds(self) -> float:
        return self._transport.spin_seconds

    @property
    def aborted(self) -> Exception | None:
        return self._transport.aborted

    def close(self) -> None:
        self._transport.close()

    def _pending(self) -> list:
        pending = getattr(self._local, "pending", None)
        if pending is None:
            pending = self._local.pending = []
        return pending

    def _sweep(self) -> None:
        """Write an event for each of this thread's messages that has completed."""
        pending = self._pending()
        if not any(entry[0].done for entry in pending):
            return
        writer = self._writer
        rank = self._transport.rank
        keep = []
        for handle, key, posted in pending:
            if not handle.done:
                keep.append((handle, key, posted))
                continue
            end = writer.now()
            sending = handle.kind == "send"
            peer = handle.peer if sending else handle.source if handle.source is not None else handle.peer
            src, dst = (rank, peer) if sending else (peer, rank)
            kind = _KINDS.get(key.kind, str(key.kind))
            number = "seq" if kind == "collective" else "tag"
            args = (  # all numbers but `kind`, so formatting them is enough (see TraceWriter.complete)
                f'{{"peer":{_number(peer)},"bytes":{handle.nbytes},"kind":"{kind}","group":{key.group},'
                f'"{number}":{key.seq},"step":{key.step},"src":{_number(src)},"dst":{_number(dst)},'
                f'"failed":{"true" if handle.error is not None else "false"}}}'
            )
            writer.complete(handle.kind, f"{handle.kind} {'->' if sending else '<-'} {peer}", posted, end, args)
        pending[:] = keep


def _number(rank: int | None) -> str:
    return "null" if rank is None else str(rank)

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
from meshcomm.transport.header import KIND_COLLECTIVE, KIND_MAILBOX, KIND_P2P, Key

_KINDS = {KIND_P2P: "p2p", KIND_COLLECTIVE: "collective", KIND_MAILBOX: "mpi"}


class TracedTransport:
    def __init__(self, transport, writer: TraceWriter) -> None:
        self._transport = transport
        self._writer = writer
        self._local = threading.local()  # each thread records the handles it posted

    def __getattr__(self, name: str):
        return getattr(self._transport, name)

    def isend(self, peer: int, payload: memoryview, key: Key, *fingerprint: bytes) -> Handle:
        posted = self._writer.now()
        handle = self._transport.isend(peer, payload, key, *fingerprint)
        self._pending().append((handle, key, posted))
        self._sweep()
        return handle

    def irecv(self, peer: int | None, buffer: memoryview, key: Key, *fingerprint: bytes) -> Handle:
        posted = self._writer.now()
        handle = self._transport.irecv(peer, buffer, key, *fingerprint)
        self._pending().append((handle, key, posted))
        self._sweep()
        return handle

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

"""One connection to one peer, and the framing of the messages on it: header, then payload.

A peer's channel is its TCP socket (tcp.py), or, for a peer on the same
host, a pair of shared-memory rings (shm.py) while the socket stays open
only so that the peer's death (the kernel closes its sockets) is noticed.
Either way `write` sends what the channel takes now and `read` takes in
what it holds; neither blocks.

A shared-memory peer's message whose receive is not posted yet is first left
in the ring for up to `HOLD_SECONDS`: ranks that drift apart (a root running
ahead into the next broadcast, the next step of a ring arriving during this
step's reduction) would otherwise send every byte through a freshly faulted
buffer and a second copy. The receiver reads past a held message at once when
it waits for something else from that peer (which may sit behind it), and
after the hold in any case, so a rank never stops reading for long.

A large message to a same-host peer whose rank can read this process's
memory (cma.py; probed at start-up) goes by reference: the ring carries the
header and the buffer's address, the receiver copies the bytes straight from
the sender's buffer into its own (one copy instead of two) and counts the
reference as read in the ring's control page, which completes the send (the
sender looks at that count as it looks at the rings). Until then the sender
keeps the buffer (the send's handle is not done), as it must for any send in
flight. References are read in ring order, so one count says which are done.
"""

from __future__ import annotations

import collections
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from meshcomm.security.tls import TlsStream
from meshcomm.transport import cma
from meshcomm.transport import header as wire
from meshcomm.transport.handle import Handle
from meshcomm.transport.matching import Unexpected
from meshcomm.transport.notices import Notice

if TYPE_CHECKING:  # the engine owns its peers and hands itself to them
    from meshcomm.transport.engine import SocketTransport

HOLD_SECONDS = 0.002  # longest a shared-memory message waits in its ring for its receive
REFERENCE = struct.Struct("=Q")  # what a message sent by reference carries: the buffer's address


@dataclass
class Inbound:
    """Where the bytes arriving on one connection go next."""

    header_buf: bytearray = field(default_factory=lambda: bytearray(wire.HEADER_BYTES))
    header_got: int = 0
    target: memoryview | None = None  # payload destination while a payload is arriving
    target_got: int = 0
    on_done: object = None  # callable run when the payload is complete
    handle: Handle | None = None  # the posted receive the payload is going into, if any
    held: wire.Header | None = None  # a shared-memory message left in the ring until its receive is posted
    held_until: float = 0.0  # monotonic time after which it is read into an unexpected buffer


class Peer:
    """The connection to rank `rank`: its send queue, the message arriving on it, and its sends by reference."""

    __slots__ = ("rank", "sock", "channel", "shm", "sendq", "inbound", "lost", "writing", "lent", "lent_count",
                 "_transport")

    def __init__(self, rank: int, sock: socket.socket | TlsStream, transport: "SocketTransport") -> None:
        self.rank = rank
        self.sock = sock
        self.channel = sock  # where payload bytes go: the socket, or a shared-memory channel
        self.shm = False
        self.sendq: collections.deque = collections.deque()  # [handle, [memoryviews], index, short parts]
        self.inbound = Inbound()
        self.lost: Exception | None = None
        self.writing = False
        # Sends gone by reference and not read yet, oldest first, with how many
        # references to this peer went before them (the count the peer raises).
        self.lent: collections.deque = collections.deque()  # [number, handle, payload]
        self.lent_count = 0
        self._transport = transport

    def use_rings(self, channel) -> None:
        """Move this peer's messages to a shared-memory channel; the socket only tells when it leaves."""
        self.channel, self.shm = channel, True

    # ----- sending

    def write(self) -> bool:
        """Send what the channel takes now; True if any bytes went."""
        lock = self._transport.matcher.lock
        moved = False
        while self.sendq:
            with lock:
                if not self.sendq:
                    return moved
                entry = self.sendq[0]
            handle, views, index, short_parts = entry
            try:
                rest = views[index:]
                sent = self.channel.sendmsg(rest, short_parts) if self.shm else self.channel.sendmsg(rest)
            except (BlockingIOError, InterruptedError):
                return moved
            except OSError as exc:
                self._transport.lose(self, exc)
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
                if self.shm and wrote:
                    continue  # a ring takes a part per call: offer the next (a full ring says so)
                return moved
            with lock:
                self.sendq.popleft()
            handle.complete()
        return moved

    def returned(self) -> bool:
        """Complete the sends by reference the peer has read; True if any."""
        read = self.channel.references_read()
        if self.lent[0][0] >= read:
            return False
        with self._transport.matcher.lock:
            while self.lent and self.lent[0][0] < read:
                self.lent.popleft()[1].complete()
        return True

    def send_notice(self, notice: bytes) -> None:
        """End the connection with a notice, where a header is due (best effort)."""
        # On a TCP peer the notice goes where a header is due; after a half-sent
        # message it would be read as payload, so that peer just sees us leave.
        head = self.sendq[0] if self.sendq else None
        half_sent = not self.shm and head is not None and (head[2] > 0 or head[1][0].nbytes != wire.HEADER_BYTES)
        # A TLS write that blocked part-way owes the rest of its bytes before any other.
        owes = isinstance(self.sock, TlsStream) and self.sock.mid_write
        if self.lost is not None or half_sent or owes:
            return
        try:
            self.sock.send(notice)
        except OSError:
            pass

    # ----- receiving

    def read(self, drain: bool = False) -> bool:
        """Take in what the channel holds now; True if any bytes came. A message
        with no receive posted may stay in a shared-memory ring, unless `drain`.

        A socket is read until it would block (or is lost), never less: a TLS
        channel may hold decrypted bytes that select() will not report again."""
        inbound = self.inbound
        transport = self._transport
        moved = False
        while self.lost is None:
            if inbound.held is not None:
                head = inbound.held
                if not (drain or transport.may_release(self, head)):
                    return moved
                inbound.held = None
                self._begin_payload(head)
                moved = True
                continue
            try:
                if inbound.target is None:
                    got = self.channel.recv_into(memoryview(inbound.header_buf)[inbound.header_got :])
                else:
                    got = self.channel.recv_into(inbound.target[inbound.target_got :])
            except (BlockingIOError, InterruptedError):
                return moved
            except OSError as exc:
                transport.lose(self, exc)
                return moved
            if got == 0:
                transport.lose(self, None)
                return moved
            moved = True
            if inbound.target is None:
                inbound.header_got += got
                if inbound.header_got == wire.HEADER_BYTES:
                    inbound.header_got = 0
                    try:
                        head = wire.unpack(inbound.header_buf)
                    except ValueError as exc:
                        transport.lose(self, exc)
                        return moved
                    if head.key.kind == wire.KIND_NOTICE:
                        transport.lose(self, Notice.read(head, self.sock))
                        return moved
                    if self.shm and not drain and head.key.kind != wire.KIND_MAILBOX:
                        inbound.held, inbound.held_until = head, time.monotonic() + HOLD_SECONDS
                        continue  # taken on at once when its receive is already posted
                    self._begin_payload(head)
            else:
                inbound.target_got += got
                if inbound.target_got == inbound.target.nbytes:
                    self._end_payload()

    def check_alive(self) -> None:
        """A shared-memory peer's socket carries no data: readable means it closed (maybe with a notice)."""
        transport = self._transport
        try:
            data = self.sock.recv(1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.read(drain=True)  # keep what it wrote before it went, held messages too
            transport.lose(self, exc)
            return
        self.read(drain=True)
        notice = None
        if data:
            try:
                data += self.sock.recv(wire.HEADER_BYTES - 1)
                head = wire.unpack(data[: wire.HEADER_BYTES])
                if head.key.kind == wire.KIND_NOTICE:
                    notice = Notice.read(head, self.sock)
            except (OSError, ValueError, struct.error):
                pass
        transport.lose(self, notice or (None if not data else OSError("unexpected bytes on a shared-memory peer's socket")))

    def _begin_payload(self, head: wire.Header) -> None:
        transport = self._transport
        inbound = self.inbound
        if head.key.kind == wire.KIND_CALL_FAILED:
            self._begin_call_failed(head)
            return
        if head.flags & wire.FLAG_BY_REFERENCE and not self.shm:
            transport.lose(self, ValueError("a message by reference from a rank on another host"))
            return
        matcher = transport.matcher
        with matcher.lock:
            posted = matcher.match(self.rank, head)
            if posted is not None and not matcher.accepts(posted, self.rank, head):
                posted = None
                sink = Unexpected(self.rank, head)  # read and drop the payload
                done = lambda: None  # noqa: E731
                target = memoryview(sink.data)
            elif posted is not None:
                target = posted.buffer
                done = posted.handle.complete
            else:
                message = matcher.keep_unexpected(self.rank, head)
                target = memoryview(message.data)

                def done(message=message, key=head.key) -> None:
                    with matcher.lock:
                        message.complete = True
                        if message.claimed_by is not None:
                            matcher.finish_unexpected(key, message)

        receive = posted.handle if posted is not None else None
        if head.flags & wire.FLAG_BY_REFERENCE:
            inbound.handle = receive
            self._begin_reference(target, done, receive)
            return
        if head.nbytes == 0:
            done()
            return
        inbound.target, inbound.target_got, inbound.on_done = target, 0, done
        inbound.handle = receive

    def _begin_reference(self, target: memoryview, done, receive: Handle | None) -> None:
        """The message's bytes are in the sender's memory: read its reference, then copy them into `target`.

        A sender that died took the bytes with it: the peer is lost, and the
        posted `receive` the bytes were meant for fails with it."""
        reference = bytearray(REFERENCE.size)

        def fetch() -> None:
            (address,) = REFERENCE.unpack(reference)
            try:
                cma.read(self.channel.peer_pid, address, target)
            except OSError as exc:
                self._transport.lose(self, OSError(f"could not read a message from its memory: {exc}"))
                if receive is not None:
                    receive.fail(self.lost)
                return
            self.channel.count_reference_read()
            done()

        self.inbound.target, self.inbound.target_got, self.inbound.on_done = memoryview(reference), 0, fetch

    def _begin_call_failed(self, head: wire.Header) -> None:
        if head.nbytes > wire.NOTICE_TEXT_BYTES:
            self._transport.lose(self, ValueError(f"a call-failed message of {head.nbytes} bytes"))
            return
        text = bytearray(head.nbytes)

        def done() -> None:
            self._transport.call_failed(self.rank, head.key, text.decode(errors="replace"))

        if not text:
            done()
            return
        self.inbound.target, self.inbound.target_got, self.inbound.on_done = memoryview(text), 0, done

    def _end_payload(self) -> None:
        inbound = self.inbound
        done = inbound.on_done
        inbound.target, inbound.target_got, inbound.on_done, inbound.handle = None, 0, None, None
        done()

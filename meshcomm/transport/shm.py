"""Shared-memory channels between the ranks of one host.

Every rank owns one segment, its inbox: a doorbell word, then one ring per
local peer that only that peer writes into. A ring is a single-producer
single-consumer byte stream (monotonic `tail` written by the producer, `head`
by the consumer, on separate cache lines), so no locks are needed: x86-64
keeps stores in program order, which makes "copy the bytes, then publish the
new tail" safe from Python. On other architectures the transport uses TCP.

A channel looks like a non-blocking socket to the transport (`sendmsg`,
`recv_into`, BlockingIOError when it would block), so the TCP engine's
framing and matching serve both. After moving bytes a channel rings the
other side's doorbell; a rank that found nothing to do sleeps on its own
doorbell with a futex, announced through a `sleeping` word so that busy
peers skip the wake system call.

Segments are unlinked from /dev/shm as soon as every local peer has mapped
them, so nothing is left behind after a normal exit, a crash or a kill.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform

from meshcomm.transport import cma, futex

DIRECTORY = "/dev/shm"
_PAGE = 4096
_DOORBELL_WORDS = 32  # u32 words: [0] = sequence (the futex word), [16] = sleeping, on another cache line
_SEQ, _SLEEPING = 0, 16
# u64 words in a ring's control page, each on its own cache line: the tail
# (producer), the head (consumer), and how many messages sent by reference the
# consumer has read (engine.py)
_TAIL, _HEAD, _READ = 0, 8, 16
# After the doorbell, on the first page: the owner's pid, the address of its
# own mapping and a random nonce (so peers can probe reading its memory, cma.py),
# then one byte per slot: whether the owner can read that peer's memory.
_IDENTITY = 256
_NONCE = _IDENTITY + 16
_READS = 512
READ_UNKNOWN, READ_OK, READ_REFUSED = 0, 1, 2
# A point-to-point message below this size moves in short parts (ShmChannel.sendmsg); the engine decides.
SHORT_PARTS_BELOW = 8 << 20


def available() -> bool:
    """Shared memory needs /dev/shm, futexes and x86-64's store ordering."""
    return platform.machine() == "x86_64" and futex.available() and os.path.isdir(DIRECTORY)


def segment_name(job: str, rank: int) -> str:
    return f"meshcomm-{job}-{rank}"


def remove_segments(job: str) -> list[str]:
    """Unlink segments of `job` still in /dev/shm (ranks killed during start-up); returns their names."""
    prefix = segment_name(job, 0).rsplit("-", 1)[0] + "-"
    try:
        names = [n for n in os.listdir(DIRECTORY) if n.startswith(prefix)]
    except OSError:
        return []
    for name in names:
        try:
            os.unlink(os.path.join(DIRECTORY, name))
        except OSError:
            pass
    return names


def segment_bytes(npeers: int, ring_bytes: int) -> int:
    return _PAGE + npeers * (_PAGE + ring_bytes)


def map_file(path: str, size: int, create: bool, what: str) -> mmap.mmap:
    """Create (exclusively) or open the shared file at `path` and map its `size` bytes.

    Mode 0o600: only the job's user may map it. An existing file of another
    size is refused, naming `what` it was meant to be.
    """
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    try:
        if create:
            os.ftruncate(fd, size)
        elif os.fstat(fd).st_size != size:
            raise OSError(f"{what} {path} has {os.fstat(fd).st_size} bytes, expected {size}")
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    """Remove a shared file's name; one already gone is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Segment:
    """One rank's inbox, created by its owner or mapped by a peer."""

    def __init__(self, name: str, npeers: int, ring_bytes: int, create: bool) -> None:
        self.name = name
        self.path = os.path.join(DIRECTORY, name)
        self.ring_bytes = ring_bytes
        self._map = map_file(self.path, segment_bytes(npeers, ring_bytes), create, "shared segment")
        self._view = memoryview(self._map)
        self.doorbell = self._view[: _DOORBELL_WORDS * 4].cast("I")
        self._anchor = ctypes.c_uint32.from_buffer(self._map)  # keeps the word's address valid
        self.doorbell_address = ctypes.addressof(self._anchor)
        self._identity = self._view[_IDENTITY : _IDENTITY + 16].cast("Q")
        self._reads = self._view[_READS : _READS + npeers]
        self._rings: list[tuple[memoryview, memoryview]] = []
        for slot in range(npeers):
            start = self.ring_start(slot)
            control = self._view[start : start + 192].cast("Q")
            data = self._view[start + _PAGE : start + _PAGE + ring_bytes]
            self._rings.append((control, data))

    @property
    def mapping(self) -> mmap.mmap:
        return self._map

    def ring(self, slot: int) -> tuple[memoryview, memoryview]:
        return self._rings[slot]

    def ring_start(self, slot: int) -> int:
        """Where the ring of the peer in `slot` starts in the mapping: its control page, then its bytes."""
        return _PAGE + slot * (_PAGE + self.ring_bytes)

    # ----- reading peers' memory directly (cma.py)

    def publish_identity(self) -> None:
        """Owner side: say where peers find this process's copy of the segment."""
        self._view[_NONCE : _NONCE + 8] = os.urandom(8)
        self._identity[1] = self.doorbell_address
        self._identity[0] = os.getpid()

    @property
    def owner_pid(self) -> int:
        return self._identity[0]

    def probe_owner(self) -> bool:
        """Whether this process can read the owner's memory: its nonce, read at its own address, matches."""
        nonce = bytes(self._view[_NONCE : _NONCE + 8])
        return cma.probe(self._identity[0], self._identity[1] + _NONCE, nonce)

    def record_read(self, slot: int, ok: bool) -> None:
        """Owner side: whether it can read the memory of the peer in `slot`."""
        self._reads[slot] = READ_OK if ok else READ_REFUSED

    def reads(self, slot: int) -> int:
        return self._reads[slot]

    def unlink(self) -> None:
        unlink_quietly(self.path)

    def ring_doorbell(self) -> None:
        """Tell the owner something changed; wake it if it sleeps."""
        words = self.doorbell
        words[_SEQ] = (words[_SEQ] + 1) & 0xFFFFFFFF
        if words[_SLEEPING]:
            futex.wake(self.doorbell_address)

    def sleep(self, timeout: float, ready) -> None:
        """Owner side: block until the doorbell rings (or `timeout`), unless `ready()` already holds."""
        words = self.doorbell
        seen = words[_SEQ]
        if ready():
            return
        words[_SLEEPING] = 1
        try:
            # Checked again after announcing the sleep: a peer that moved data
            # before seeing the flag has changed the sequence, so the wait returns.
            if not ready():
                futex.wait(self.doorbell_address, seen, timeout)
        finally:
            words[_SLEEPING] = 0

    def close(self) -> None:
        views = [self.doorbell, self._identity, self._reads, self._view] + [v for pair in self._rings for v in pair]
        self._rings = []
        for view in views:
            view.release()
        del self._anchor
        try:
            self._map.close()
        except BufferError:
            pass  # a view is still exported somewhere; the mapping goes with the process


class ShmChannel:
    """The byte stream to one local peer (through its inbox) and from it (through ours)."""

    def __init__(self, mine: Segment, theirs: Segment, my_slot: int, their_slot: int) -> None:
        self._mine = mine
        self._theirs = theirs
        self._my_slot = my_slot
        self._their_slot = their_slot
        self.peer_pid = theirs.owner_pid
        self._out_control, self._out = theirs.ring(my_slot)
        self._in_control, self._in = mine.ring(their_slot)
        self._size = mine.ring_bytes
        # Bytes moved per call, published at once: a quarter ring, so a long
        # message streams, the consumer copying one part out while the producer
        # copies the next in (benchmarks/results/design-figures-2026-11-25.md).
        self._part = max(self._size // 4, 4096)
        # A send below SHORT_PARTS_BELOW moves in parts of at most 512 KiB, so its receiver starts copying out
        # sooner (benchmarks/results/p2p-streaming-2026-11-26.md). A collective's messages keep the quarter
        # ring, in which a broadcast's pieces stream faster (benchmarks/results/staged-posts-2026-11-27.md).
        self._short_part = min(self._part, 512 << 10)

    @property
    def part_bytes(self) -> int:
        """The most bytes one sendmsg or recv_into moves."""
        return self._part

    def frame_parts(self, sending: bool) -> tuple[mmap.mmap, int, int, mmap.mmap]:
        """For a compiled message lane (native/rings.c): the mapping holding the ring one way, where the ring
        starts in it, its bytes, and the mapping whose doorbell tells the other side (the peer's, both ways)."""
        ring_owner, slot = (self._theirs, self._my_slot) if sending else (self._mine, self._their_slot)
        return ring_owner.mapping, ring_owner.ring_start(slot), self._size, self._theirs.mapping

    def peer_reads_mine(self) -> bool:
        """Whether the peer found it can read this process's memory (so large messages may go by reference)."""
        return self._theirs.reads(self._my_slot) == READ_OK

    def references_read(self) -> int:
        """Sender side: how many of this rank's messages by reference the peer has read."""
        return self._out_control[_READ]

    def count_reference_read(self) -> None:
        """Receiver side: one more of the peer's references is read; its sender may reuse the buffer."""
        control = self._in_control
        control[_READ] += 1
        words = self._theirs.doorbell
        if words[_SLEEPING]:
            self._theirs.ring_doorbell()

    def readable(self) -> bool:
        control = self._in_control
        return control[_TAIL] != control[_HEAD]

    def writable(self) -> bool:
        control = self._out_control
        return control[_TAIL] - control[_HEAD] < self._size

    def sendmsg(self, views: list[memoryview], short_parts: bool = False) -> int:
        """Copy the start of `views`, one part of a message (a short one when `short_parts`), into the ring;
        bytes moved."""
        control, ring, size = self._out_control, self._out, self._size
        tail = control[_TAIL]
        part = self._short_part if short_parts else self._part
        free = min(size - (tail - control[_HEAD]), part)
        if free == 0:
            raise BlockingIOError
        written = 0
        for view in views:
            n = min(view.nbytes, free - written)
            _copy_in(ring, (tail + written) % size, view[:n] if n < view.nbytes else view)
            written += n
            if written == free:
                break
        control[_TAIL] = tail + written  # published after the bytes (x86-64 store order)
        self._theirs.ring_doorbell()
        return written

    def recv_into(self, target: memoryview) -> int:
        control, ring, size = self._in_control, self._in, self._size
        head = control[_HEAD]
        avail = control[_TAIL] - head
        if avail == 0:
            raise BlockingIOError
        n = min(avail, target.nbytes, self._part)
        _copy_out(ring, head % size, target[:n] if n < target.nbytes else target)
        control[_HEAD] = head + n
        words = self._theirs.doorbell
        if words[_SLEEPING]:  # the producer may be waiting for room
            self._theirs.ring_doorbell()
        return n


def _copy_in(ring: memoryview, at: int, src: memoryview) -> None:
    first = min(src.nbytes, ring.nbytes - at)
    ring[at : at + first] = src[:first]
    if first < src.nbytes:
        ring[: src.nbytes - first] = src[first:]


def _copy_out(ring: memoryview, at: int, dst: memoryview) -> None:
    first = min(dst.nbytes, ring.nbytes - at)
    dst[:first] = ring[at : at + first]
    if first < dst.nbytes:
        dst[first:] = ring[: dst.nbytes - first]

"""A shared-memory ring between two inboxes, driven by hand in one process."""

from __future__ import annotations

import os

import pytest

from meshcomm.transport import shm

RING = 64 << 10


@pytest.fixture
def channels(request):
    """Both ends of one pair: (rank 0's channel to rank 1, rank 1's channel to rank 0), with rings of
    RING bytes unless the test is parametrized indirectly with another size."""
    ring = getattr(request, "param", RING)
    names = [f"meshcomm-test-{os.getpid()}-ring-{rank}" for rank in (0, 1)]
    inboxes = [shm.Segment(name, 2, ring, create=True) for name in names]
    mapped = [shm.Segment(name, 2, ring, create=False) for name in names]
    try:
        yield shm.ShmChannel(inboxes[0], mapped[1], 0, 1), shm.ShmChannel(inboxes[1], mapped[0], 1, 0)
    finally:
        for segment in mapped:
            segment.close()
        for segment in inboxes:
            segment.unlink()
            segment.close()


def test_a_long_message_moves_a_quarter_ring_per_call_each_way(channels) -> None:
    """Each call moves at most a quarter of the ring and publishes it, so the
    reader can copy one part out while the writer copies the next in."""
    sender, receiver = channels
    message = bytes(range(256)) * (RING // 256 * 3)  # three rings' worth
    target = bytearray(len(message))
    sent = got = 0
    writes, reads = [], []
    for _ in range(100):  # 12 rounds when each call moves a quarter ring; bounded if it moves nothing
        if got == len(message):
            break
        try:
            n = sender.sendmsg([memoryview(message)[sent:]])
            writes.append(n)
            sent += n
        except BlockingIOError:
            pass
        try:
            n = receiver.recv_into(memoryview(target)[got:])
            reads.append(n)
            got += n
        except BlockingIOError:
            pass
    assert target == message
    assert max(writes) == RING // 4 and max(reads) == RING // 4
    assert len(writes) == len(reads) == 12


def test_a_full_ring_refuses_more_until_the_reader_takes_a_part(channels) -> None:
    sender, receiver = channels
    part = memoryview(bytes(RING // 4))
    for _ in range(4):
        assert sender.sendmsg([part]) == RING // 4
    with pytest.raises(BlockingIOError):
        sender.sendmsg([part])
    assert receiver.recv_into(memoryview(bytearray(RING))) == RING // 4
    assert sender.sendmsg([part, part]) == RING // 4


def parts_written(sender, receiver, message: bytes, short_parts: bool) -> list[int]:
    """The bytes each sendmsg moved while `message` crossed (checked whole), in short parts or not."""
    target = bytearray(len(message))
    sent = got = 0
    writes = []
    for _ in range(1000):  # bounded if nothing moves
        if got == len(message):
            break
        if sent < len(message):
            try:
                n = sender.sendmsg([memoryview(message)[sent:]], short_parts)
                writes.append(n)
                sent += n
            except BlockingIOError:
                pass
        try:
            got += receiver.recv_into(memoryview(target)[got:])
        except BlockingIOError:
            pass
    assert target == message
    return writes


@pytest.mark.parametrize("channels", [4 << 20], indirect=True)
def test_a_message_moves_in_parts_of_512_kib_when_short_parts_are_asked_for_and_in_quarter_rings_if_not(
        channels) -> None:
    """Smaller parts let the receiver of a few-MiB send start copying out sooner; a collective's messages
    keep the quarter ring (1 MiB here), which moves them in fewer calls."""
    sender, receiver = channels
    message = bytes(range(256)) * ((3 << 20) // 256)
    assert set(parts_written(sender, receiver, message, True)) == {512 << 10}
    assert set(parts_written(sender, receiver, message, False)) == {1 << 20}
    assert set(parts_written(sender, receiver, message[: 100_000], True)) == {100_000}

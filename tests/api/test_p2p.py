"""Point-to-point between real processes: every dtype, 0 B to 256 MiB, both directions, any source, batches."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist
from tests.ranks import get_cluster

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128]


def _pattern(rank: int, count: int, dtype) -> np.ndarray:
    values = (np.arange(count) * 7 + rank * 13) % 101
    if np.dtype(dtype).kind == "b":
        return (values % 2).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (values + 1j * rank).astype(dtype)
    return values.astype(dtype)


def exchange_every_dtype() -> int:
    """Each rank sends each dtype to its right neighbour while receiving from its left."""
    rank, size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    for dtype in DTYPES:
        for count in (0, 1, 5, 1000):
            out = _pattern(rank, count, dtype)
            got = np.zeros(count, dtype=dtype)
            works = [dist.isend(out, right), dist.irecv(got, left)]
            for w in works:
                w.wait()
            assert np.array_equal(got, _pattern(left, count, dtype)), (dtype, count)
    return len(DTYPES)


def both_directions(nbytes: int) -> bool:
    """Rank pairs (0,1), (2,3)... send to each other at once with blocking sends: must not deadlock."""
    rank, size = dist.get_rank(), dist.get_world_size()
    peer = rank ^ 1
    if peer >= size:
        return True
    out = np.full(nbytes, rank % 251, dtype=np.uint8)
    out[::4096] = 7
    got = np.empty(nbytes, dtype=np.uint8)
    dist.send(out, peer)  # both ranks send first: the transport must keep reading meanwhile
    dist.recv(got, peer)
    expected = np.full(nbytes, peer % 251, dtype=np.uint8)
    expected[::4096] = 7
    return bool(np.array_equal(got, expected))


def any_source() -> list[int]:
    """Rank 0 receives one message from every other rank without naming the source."""
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        sources = []
        for _ in range(size - 1):
            buf = np.empty(3, dtype=np.int64)
            src = dist.recv(buf, tag=5)
            assert np.array_equal(buf, [src, src * 2, src * 3])
            sources.append(src)
        return sorted(sources)
    dist.send(np.array([rank, rank * 2, rank * 3], dtype=np.int64), 0, tag=5)
    return []


def batch_ring() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    send_buf = np.full(10, rank, dtype=np.float32)
    recv_buf = np.zeros(10, dtype=np.float32)
    ops = [dist.P2POp(dist.isend, send_buf, (rank + 1) % size), dist.P2POp(dist.irecv, recv_buf, (rank - 1) % size)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return bool((recv_buf == (rank - 1) % size).all())


def tags_keep_messages_apart() -> bool:
    """Messages with different tags match their own receive, whatever the posting order."""
    rank, size = dist.get_rank(), dist.get_world_size()
    if size < 2 or rank > 1:
        return True
    peer = 1 - rank
    if rank == 0:
        dist.send(np.array([1.0]), peer, tag=1)
        dist.send(np.array([2.0]), peer, tag=2)
        return True
    b2, b1 = np.zeros(1), np.zeros(1)
    w2 = dist.irecv(b2, peer, tag=2)
    w1 = dist.irecv(b1, peer, tag=1)
    w2.wait()
    w1.wait()
    return b1[0] == 1.0 and b2[0] == 2.0


def self_send() -> bool:
    rank = dist.get_rank()
    got = np.zeros(4, dtype=np.int32)
    work = dist.irecv(got, rank, tag=9)
    dist.send(np.arange(4, dtype=np.int32), rank, tag=9)
    work.wait()
    return bool(np.array_equal(got, np.arange(4)))


def non_contiguous() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    matrix = np.arange(20, dtype=np.float64).reshape(4, 5) + rank
    target = np.zeros((4, 5))
    column = target[:, 1]  # a strided view: the result must land in `target`
    works = [dist.isend(matrix[:, 2], (rank + 1) % size), dist.irecv(column, (rank - 1) % size)]
    for w in works:
        w.wait()
    return bool(np.array_equal(target[:, 1], np.arange(20).reshape(4, 5)[:, 2] + (rank - 1) % size))


def size_mismatch_is_an_error() -> str:
    rank = dist.get_rank()
    if rank == 0:
        dist.send(np.zeros(8, dtype=np.uint8), 1, tag=77)
        return ""
    if rank == 1:
        try:
            dist.recv(np.zeros(4, dtype=np.uint8), 0, tag=77)
        except dist.MeshcommError as exc:
            return str(exc)
        return "no error"
    return ""


def test_every_dtype_round_the_ring(cluster):
    assert cluster.run(exchange_every_dtype) == [len(DTYPES)] * cluster.size


@pytest.mark.parametrize("nbytes", [0, 1, 4095, 1 << 20, 256 << 20])
def test_blocking_sends_in_both_directions_do_not_deadlock(cluster, nbytes):
    assert all(cluster.run(both_directions, nbytes, timeout=120))


def test_receive_from_any_source_reports_the_sender(cluster):
    assert cluster.run(any_source)[0] == list(range(1, cluster.size))


def any_source_in_a_sub_group() -> int | None:
    """In a group of the last two ranks, the second receives from any source: the sender's global rank comes back."""
    rank, size = dist.get_rank(), dist.get_world_size()
    pair = dist.new_group([size - 2, size - 1])
    if rank == size - 2:
        dist.send(np.array([rank]), group=pair, group_dst=1)
    elif rank == size - 1:
        got = np.zeros(1, dtype=np.int64)
        return dist.recv(got, group=pair)
    return None


@pytest.mark.parametrize("size", [3, 4])  # group ranks differ from global ranks
def test_receive_from_any_source_in_a_sub_group_reports_the_global_rank(size):
    assert get_cluster(size).run(any_source_in_a_sub_group)[-1] == size - 2


def test_batch_isend_irecv_ring(cluster):
    assert all(cluster.run(batch_ring))


def test_tags_keep_messages_apart(cluster):
    assert all(cluster.run(tags_keep_messages_apart))


def test_send_to_self(cluster):
    assert all(cluster.run(self_send))


def test_non_contiguous_arrays_are_sent_and_received_in_place(cluster):
    assert all(cluster.run(non_contiguous))


@pytest.mark.parametrize("size", [2, 3])
def test_receive_buffer_of_the_wrong_size_is_an_error_naming_both_sizes(size):
    message = get_cluster(size).run(size_mismatch_is_an_error)[1]
    assert "8 bytes" in message and "4 bytes" in message


def test_eight_ranks_point_to_point(cluster8):
    assert cluster8.run(exchange_every_dtype) == [len(DTYPES)] * 8
    assert cluster8.run(any_source)[0] == list(range(1, 8))
    assert all(cluster8.run(batch_ring))
    assert all(cluster8.run(both_directions, 1 << 20, timeout=120))

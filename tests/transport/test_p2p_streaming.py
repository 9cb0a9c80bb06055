"""Which send/recv messages between ranks of one host stream through the ring, and which go by reference.

Below MESHCOMM_STREAM_BYTES (8 MiB) a point-to-point message streams through
the ring when the host has a core per rank: the sender copies a part in while
the receiver copies the one before out. From MESHCOMM_SINGLE_COPY_BYTES up it
goes by reference otherwise (the receiver reads the sender's memory with
process_vm_readv), as collectives' messages always do.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import meshcomm as dist
from meshcomm.transport import local, shm
from tests.ranks import Cluster

SIZES = [(1 << 20) - 4, 1 << 20, 3 << 20, (8 << 20) - 4, 8 << 20, 9 << 20]


def references_per_size() -> tuple[bool, bool, list[int]]:
    """Rank 0 sends each of SIZES to rank 1 (bytes checked there); other ranks only watch: (the host is
    crowded, rank 1 reads rank 0's memory, how many sends to rank 1 went by reference at each size)."""
    from meshcomm.api.state import runtime

    transport, rank = runtime().transport, dist.get_rank()
    peer = transport._peers[1 if rank != 1 else 0]
    counts = []
    for nbytes in SIZES:
        before = peer.lent_count
        message = (np.arange(nbytes, dtype=np.int64) % 251).astype(np.uint8)
        if rank == 0:
            dist.send(message, 1)
        elif rank == 1:
            got = np.zeros(nbytes, np.uint8)
            dist.recv(got, 0)
            assert np.array_equal(got, message), nbytes
        counts.append(peer.lent_count - before)
    dist.barrier()
    return transport.crowded, peer.shm and peer.channel.peer_reads_mine(), counts


@pytest.mark.skipif(not shm.available(), reason="needs shared memory (x86-64 Linux with futexes)")
@pytest.mark.parametrize("nranks, stream_bytes", [(2, ""), (2, "0"), (3, "")])
def test_send_streams_below_stream_bytes_when_each_rank_has_a_core(nranks, stream_bytes) -> None:
    """On a 2-core machine 2 ranks have a core each and 3 do not (crowded); elsewhere the expectation follows
    the host's cores."""
    env = {"MESHCOMM_STREAM_BYTES": stream_bytes} if stream_bytes else {}
    with Cluster(nranks, env=env) as cluster:
        (crowded, reads, sent), (_, _, received), *_ = cluster.run(references_per_size, timeout=60)
    assert crowded == (nranks > (os.cpu_count() or 1))
    assert received == [0] * len(SIZES)  # rank 1 sent nothing
    if not reads:  # the kernel refused process_vm_readv between the ranks: everything streams
        assert sent == [0] * len(SIZES)
        return
    streamed_below = 1 << 20 if crowded or stream_bytes == "0" else 8 << 20
    assert sent == [int(n >= streamed_below) for n in SIZES]


@pytest.mark.parametrize("value", ["-1", "lots"])
def test_a_bad_stream_bytes_is_named(monkeypatch, value) -> None:
    monkeypatch.setenv("MESHCOMM_STREAM_BYTES", value)
    with pytest.raises(ValueError, match="MESHCOMM_STREAM_BYTES must be an integer"):
        local.stream_bytes()


def short_parts_asked() -> tuple[set, set]:
    """Rank 0's ring writes to rank 1 for a 3 MiB send and a 2 MiB binomial broadcast (bytes checked on rank
    1): whether each asked for short parts."""
    from meshcomm.api.state import runtime

    rank = dist.get_rank()
    channel = runtime().transport._peers[1 - rank].channel
    asked: list[bool] = []
    original = channel.sendmsg

    def recording(views, short_parts=False):
        asked.append(short_parts)
        return original(views, short_parts)

    channel.sendmsg = recording
    try:
        message = (np.arange(3 << 20) % 251).astype(np.uint8)
        if rank == 0:
            dist.send(message, 1)
        else:
            got = np.zeros_like(message)
            dist.recv(got, 0)
            assert np.array_equal(got, message)
        sent, asked[:] = set(asked), []
        data = (np.arange(1 << 19) * (rank + 1)).astype(np.float32)
        dist.broadcast(data, src=0, algorithm="binomial")
        assert np.array_equal(data, np.arange(1 << 19).astype(np.float32))
        return sent, set(asked)
    finally:
        del channel.sendmsg


@pytest.mark.skipif(not shm.available(), reason="needs shared memory (x86-64 Linux with futexes)")
def test_a_send_streams_in_short_parts_and_a_collective_s_messages_in_quarter_rings() -> None:
    with Cluster(2, env={"MESHCOMM_SINGLE_COPY_BYTES": "0"}) as cluster:  # every message through the ring
        (send_parts, broadcast_parts), _ = cluster.run(short_parts_asked, timeout=60)
    assert send_parts == {True} and broadcast_parts == {False}

"""Shared memory within a host, TCP between hosts, chosen per peer; both carry every operation.

Each configuration is a cluster of real processes: shared memory with the
default rings (large messages go by reference where the kernel allows it),
every message by reference, no message by reference (all through the rings),
shared memory with 4 KiB rings (every large message streams through a ring
many times over, wrapping around), TCP only, and two fake hosts
(MESHCOMM_HOST_ID) so that one job mixes both transports.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import meshcomm as dist
from meshcomm.transport import cma, shm
from tests.api import test_collectives as coll
from tests.api import test_p2p as p2p
from tests.ranks import Cluster

CONFIGS = {
    "shm": (3, {}),
    "shm-tiny-rings": (3, {"MESHCOMM_SHM_RING_BYTES": "4096", "MESHCOMM_SINGLE_COPY_BYTES": "0"}),
    "shm-all-by-reference": (3, {"MESHCOMM_SINGLE_COPY_BYTES": "1"}),
    "shm-no-reference": (3, {"MESHCOMM_SINGLE_COPY_BYTES": "0"}),
    "tcp": (3, {"MESHCOMM_TRANSPORT": "tcp"}),
    "two-hosts": (4, {"MESHCOMM_HOST_ID": ["host-a", "host-a", "host-b", "host-b"]}),
}


def shm_peers() -> list[int]:
    from meshcomm.api.state import runtime

    return sorted(state.rank for state in runtime().transport._shm_peers)


def expected_shm_peers(name: str, rank: int, size: int) -> list[int]:
    if name == "tcp" or not shm.available():
        return []
    if name == "two-hosts":
        return [r for r in range(size) if r // 2 == rank // 2 and r != rank]
    return [r for r in range(size) if r != rank]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def configured(request):
    size, env = CONFIGS[request.param]
    cluster = Cluster(size, env=env)
    yield request.param, cluster
    cluster.close()


def test_each_peer_gets_the_transport_its_host_calls_for(configured) -> None:
    name, cluster = configured
    got = cluster.run(shm_peers)
    assert got == [expected_shm_peers(name, r, cluster.size) for r in range(cluster.size)]


def test_no_segment_stays_in_dev_shm_while_the_job_runs(configured) -> None:
    _, cluster = configured
    # Segments are unlinked once every local peer has mapped them.
    pids = {str(p.pid) for p in cluster.procs}
    leftovers = [n for n in os.listdir(shm.DIRECTORY) if n.startswith("meshcomm-") and any(p in n for p in pids)]
    assert leftovers == []


@pytest.mark.parametrize("nbytes", [0, 1, 4095, 4096, 4097, 3 << 20])
def test_point_to_point_both_directions(configured, nbytes) -> None:
    _, cluster = configured
    assert all(cluster.run(p2p.both_directions, nbytes))


def test_every_dtype_any_source_and_batches(configured) -> None:
    _, cluster = configured
    assert cluster.run(p2p.exchange_every_dtype) == [len(p2p.DTYPES)] * cluster.size
    assert cluster.run(p2p.any_source)[0] == list(range(1, cluster.size))
    assert all(cluster.run(p2p.batch_ring))


@pytest.mark.parametrize("count", [1, 1000, 600_000])
def test_collectives_small_and_large(configured, count) -> None:
    _, cluster = configured
    assert all(cluster.run(coll.all_reduce_case, "sum", np.float64, count))
    assert all(cluster.run(coll.broadcast_case, cluster.size - 1, count))
    assert all(cluster.run(coll.all_gather_cases, count))
    assert all(cluster.run(coll.reduce_scatter_cases, count))
    assert all(cluster.run(coll.all_to_all_cases))
    assert all(cluster.run(coll.gather_scatter_cases, 0))


def many_concurrent_groups() -> bool:
    """Async collectives on the world and on pairs at once, large enough to fill rings."""
    rank, size = dist.get_rank(), dist.get_world_size()
    # Every rank creates every pair group, in the same order (torch's rule).
    pairs = [dist.new_group(list(range(start, min(start + 2, size)))) for start in range(0, size, 2)]
    pair = pairs[rank // 2] if size > 1 else None
    a = np.full(300_000, rank, np.float32)
    b = np.full(300_000, 1, np.float32)
    works = [dist.all_reduce(a, async_op=True)]
    if pair is not None:
        works.append(dist.all_reduce(b, group=pair, async_op=True))
    for work in works:
        work.wait()
    partners = [r for r in range(size) if r // 2 == rank // 2]
    return bool((a == sum(range(size))).all() and (b == len(partners)).all())


def test_concurrent_groups_share_the_rings(configured) -> None:
    _, cluster = configured
    assert all(cluster.run(many_concurrent_groups))


def later_tag_first() -> bool:
    """Rank 0 sends tag 1 then tag 2; rank 1 asks for tag 2 first: it must read past tag 1."""
    rank = dist.get_rank()
    first, second = np.arange(300_000, dtype=np.float32), np.arange(10, dtype=np.int64)
    if rank == 0:
        dist.send(first, 1, tag=1)
        dist.send(second, 1, tag=2)
    elif rank == 1:
        got_second, got_first = np.empty_like(second), np.empty_like(first)
        dist.recv(got_second, 0, tag=2)
        dist.recv(got_first, 0, tag=1)
        return bool(np.array_equal(got_first, first) and np.array_equal(got_second, second))
    return True


def test_a_receive_for_a_later_message_reads_past_an_earlier_one(configured) -> None:
    _, cluster = configured
    assert all(cluster.run(later_tag_first))


def send_completes_while_receiver_waits_elsewhere() -> bool:
    """Rank 0's send to rank 1 must finish before rank 1 posts its receive: rank 1 is
    waiting for rank 2, who only sends once rank 0's send is done. A message left in
    its ring for the receive must still be taken in when that receive is not coming."""
    rank = dist.get_rank()
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: more than a tiny ring holds
    token = np.array([7], dtype=np.int64)
    if rank == 0:
        dist.send(big, 1, tag=1)
        dist.send(token, 2, tag=2)
    elif rank == 2:
        dist.recv(token, 0, tag=2)
        dist.send(token, 1, tag=3)
    elif rank == 1:
        relayed, got = np.empty_like(token), np.empty_like(big)
        dist.recv(relayed, 2, tag=3)
        dist.recv(got, 0, tag=1)
        return bool(relayed[0] == 7 and np.array_equal(got, big))
    return True


def test_a_send_completes_while_its_receiver_waits_on_another_peer(configured) -> None:
    _, cluster = configured
    assert all(cluster.run(send_completes_while_receiver_waits_elsewhere, timeout=30))


def references_sent_in_a_large_exchange() -> tuple[list[int], int]:
    """(what this rank's inbox says about reading each local peer, messages it sent by reference)
    after an 8 MiB exchange with every peer (smaller sends stream through the ring where each rank has
    a core, test_p2p_streaming.py)."""
    from meshcomm.api.state import runtime

    rank, size = dist.get_rank(), dist.get_world_size()
    out = np.full(8 << 20, rank, dtype=np.uint8)
    got = {peer: np.zeros(8 << 20, dtype=np.uint8) for peer in range(size) if peer != rank}
    works = [dist.isend(out, peer) for peer in got]
    for peer, buffer in got.items():
        dist.recv(buffer, peer)
        assert (buffer == peer).all()
    for work in works:
        work.wait()
    transport = runtime().transport
    local = transport._local
    reads = [local.segment.reads(local.ranks.index(p.rank)) for p in transport._shm_peers]
    return reads, sum(p.lent_count for p in transport._shm_peers)


def yama_forbids_reading_siblings() -> bool:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read()) > 0
    except OSError:
        return False


def test_large_messages_go_by_reference_where_the_kernel_allows_it(configured) -> None:
    name, cluster = configured
    results = cluster.run(references_sent_in_a_large_exchange)
    reads = [r for rank_reads, _ in results for r in rank_reads]
    sent = [count for _, count in results]
    if name in ("tcp",) or not shm.available():
        assert reads == [] and sent == [0] * cluster.size
    elif name in ("shm-no-reference", "shm-tiny-rings"):
        assert set(reads) == {shm.READ_REFUSED} and sent == [0] * cluster.size
    elif not cma.available() or yama_forbids_reading_siblings():
        assert set(reads) == {shm.READ_REFUSED} and sent == [0] * cluster.size
    else:
        assert set(reads) == {shm.READ_OK}
        assert all(count >= 1 for count in sent), sent

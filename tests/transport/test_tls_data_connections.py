"""Data connections between hosts over TLS: collectives and P2P correct, and the data port speaks only TLS.

Three ranks on two fake hosts (MESHCOMM_HOST_ID): ranks 0 and 1 share host a
(shared memory carries their data; their TCP connection, which only watches
for the other's death, runs TLS too), rank 2 is alone on host b, so every
byte to or from it crosses a TLS connection.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

import meshcomm as dist
from meshcomm.security import auth
from meshcomm.transport import shm
from tests.api import test_collectives as coll
from tests.ranks import Cluster
from tests.tls_helpers import client_context, read_over_tls, read_until_closed, self_signed, tls_env

HOSTS = ["host-a", "host-a", "host-b"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    directory = tmp_path_factory.mktemp("certs")
    return {name: self_signed(directory, name) for name in ("job", "stranger")}


@pytest.fixture(scope="module")
def cluster(certs):
    env = {"MESHCOMM_HOST_ID": HOSTS, "MESHCOMM_TOKEN": "tls-job", **tls_env(*certs["job"])}
    cluster = Cluster(len(HOSTS), env=env)
    yield cluster
    cluster.close()


def channel_kinds() -> dict[int, tuple[str, str]]:
    from meshcomm.api.state import runtime

    return {peer: (type(state.sock).__name__, type(state.channel).__name__)
            for peer, state in runtime().transport._peers.items()}


def test_every_connection_is_tls_and_same_host_payload_stays_in_shared_memory(cluster) -> None:
    same_host_channel = "ShmChannel" if shm.available() else "TlsStream"
    expected = [
        {peer: ("TlsStream", same_host_channel if HOSTS[peer] == HOSTS[rank] else "TlsStream")
         for peer in range(len(HOSTS)) if peer != rank}
        for rank in range(len(HOSTS))
    ]
    assert cluster.run(channel_kinds) == expected


def exchange_across_hosts(nbytes: int) -> bool:
    """Ranks 0 and 2 (different hosts) send to each other at once, both sending first."""
    rank = dist.get_rank()
    if rank == 1:
        return True
    peer = 2 - rank
    out = (np.arange(nbytes, dtype=np.int64) * 31 + rank).astype(np.uint8)
    got = np.empty(nbytes, dtype=np.uint8)
    dist.send(out, peer)  # neither can finish sending unless the other keeps reading meanwhile
    dist.recv(got, peer)
    return bool(np.array_equal(got, (np.arange(nbytes, dtype=np.int64) * 31 + peer).astype(np.uint8)))


def ring_of_isends(nbytes: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    out = np.full(nbytes, rank + 1, dtype=np.uint8)
    got = np.zeros(nbytes, dtype=np.uint8)
    for work in [dist.isend(out, right), dist.irecv(got, left)]:
        work.wait()
    return bool((got == left + 1).all())


@pytest.mark.parametrize("nbytes", [0, 1, 16385, 5 << 20])
def test_point_to_point_across_hosts(cluster, nbytes) -> None:
    assert all(cluster.run(exchange_across_hosts, nbytes))
    assert all(cluster.run(ring_of_isends, nbytes))


@pytest.mark.parametrize("count", [1, 1000, 600_000])  # 600,000 float64: 4.6 MiB
def test_collectives_across_hosts(cluster, count) -> None:
    assert all(cluster.run(coll.all_reduce_case, "sum", np.float64, count))
    assert all(cluster.run(coll.broadcast_case, 2, count))
    assert all(cluster.run(coll.all_gather_cases, count))
    assert all(cluster.run(coll.reduce_scatter_cases, count))
    assert all(cluster.run(coll.all_to_all_cases))


def data_address() -> tuple[str, int]:
    from meshcomm.api.state import runtime

    host, port = runtime().transport.address.rsplit(":", 1)
    return host, int(port)


def test_the_data_port_greets_only_inside_tls_and_only_the_jobs_certificates(cluster, certs) -> None:
    address = cluster.run(data_address)[2]
    member = client_context(certs["job"][0], certs["job"])
    assert read_over_tls(member, address, len(auth.MAGIC)) == auth.MAGIC
    stranger = client_context(certs["job"][0], certs["stranger"])
    assert read_over_tls(stranger, address) == b""
    with socket.create_connection(address, timeout=15) as plain:
        plain.sendall(auth.MAGIC + bytes(auth.NONCE_BYTES + auth.DIGEST_BYTES))
        assert auth.MAGIC not in read_until_closed(plain)
    assert all(cluster.run(coll.all_reduce_case, "sum", np.float64, 1000))

"""TCP data connections: only holders of the job token get in, and strangers cannot stall a job.

Two transports run in threads of this process, meeting through a file store;
a third party dials rank 1's data port directly.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from meshcomm.errors import AuthenticationError
from meshcomm.security import auth
from meshcomm.rendezvous.file_store import FileStore
from meshcomm.transport import header as wire
from meshcomm.transport.engine import SocketTransport

TOKEN = b"the-job-token"
KEY = wire.Key(wire.KIND_P2P, 0, 7, 0)


class _GatedPair:
    """Rank 1 starts (and listens) at once; rank 0 dials only when `admit_rank_0` is called."""

    def __init__(self, store_path: Path) -> None:
        self._gate = threading.Event()
        self._made: dict[int, SocketTransport] = {}
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._start, args=(r, store_path)) for r in (1, 0)]
        for t in self._threads:
            t.start()
        host, port = FileStore(store_path, timeout=30).get("transport/addr/1").decode().rsplit(":", 1)
        self.rank_1_address = (host, int(port))

    def _start(self, rank: int, store_path: Path) -> None:
        try:
            if rank == 0:
                assert self._gate.wait(30)
            self._made[rank] = SocketTransport(rank, 2, FileStore(store_path, timeout=30), TOKEN, 30.0, "127.0.0.1")
        except BaseException as exc:  # reported by admit_rank_0
            self._errors.append(exc)

    def admit_rank_0(self, cleanup: list[SocketTransport]) -> dict[int, SocketTransport]:
        self._gate.set()
        for t in self._threads:
            t.join(60)
            assert not t.is_alive(), "transport start-up did not finish within 60 s"
        assert not self._errors, self._errors
        cleanup.extend(self._made.values())
        return self._made


def _exchange_works(transports: dict[int, SocketTransport]) -> bool:
    payload = np.arange(1000, dtype=np.int32)
    out = np.zeros_like(payload)
    recv = transports[1].irecv(0, memoryview(out).cast("B"), KEY)
    send = transports[0].isend(1, memoryview(payload).cast("B"), KEY)
    transports[0].wait([send], timeout=30)
    transports[1].wait([recv], timeout=30)
    return bool((out == payload).all())


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cleanup() -> Iterator[list[SocketTransport]]:
    made: list[SocketTransport] = []
    yield made
    for transport in made:
        transport.close()


def test_a_connection_with_the_wrong_token_is_refused_and_the_job_still_connects(store_path, cleanup) -> None:
    pair = _GatedPair(store_path)
    with socket.create_connection(pair.rank_1_address, timeout=10) as stranger:
        # Rank 1 hangs up instead of proving itself to a client that failed its proof.
        with pytest.raises(AuthenticationError, match="closed the connection"):
            auth.handshake(stranger, b"a-guessed-token", b"data", is_server=False, timeout=10)
    assert _exchange_works(pair.admit_rank_0(cleanup))


def test_a_silent_stranger_holding_the_port_does_not_keep_rank_0_out(store_path, cleanup) -> None:
    pair = _GatedPair(store_path)
    # Connects and then says nothing: the handshake is served off the accept
    # loop, so the real rank 0 is admitted while this one waits.
    with socket.create_connection(pair.rank_1_address, timeout=10):
        transports = pair.admit_rank_0(cleanup)
    assert _exchange_works(transports)


def test_the_token_holder_cannot_claim_a_rank_that_does_not_dial_this_one(store_path, cleanup) -> None:
    pair = _GatedPair(store_path)
    # Rank 1 accepts only ranks below it; a client naming rank 5 is dropped.
    with socket.create_connection(pair.rank_1_address, timeout=10) as impostor:
        auth.handshake(impostor, TOKEN, b"data", is_server=False, timeout=10)
        impostor.sendall((5).to_bytes(4, "big"))
        impostor.settimeout(10)
        assert impostor.recv(1) == b"", "rank 1 kept a connection that claimed rank 5"
    assert _exchange_works(pair.admit_rank_0(cleanup))

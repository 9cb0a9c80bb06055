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
from meshcomm.rendezvous import auth
from meshcomm.rendezvous.file_store import FileStore
from meshcomm.transport import header as wire
from meshcomm.transport.engine import Transport

TOKEN = b"the-job-token"
KEY = wire.Key(wire.KIND_P2P, 0, 7, 0)


def _start_pair(store_path: Path, before_rank_0: threading.Event | None = None):
    """Rank 1 first (it listens for rank 0), rank 0 dials once `before_rank_0` is set."""
    made: dict[int, Transport] = {}
    errors: list[BaseException] = []

    def start(rank: int) -> None:
        try:
            if rank == 0 and before_rank_0 is not None:
                assert before_rank_0.wait(30)
            made[rank] = Transport(rank, 2, FileStore(store_path, timeout=30), TOKEN, 30.0, "127.0.0.1")
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(r,)) for r in (1, 0)]
    for t in threads:
        t.start()
    return made, errors, threads


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "transport start-up did not finish within 60 s"


def _rank_1_address(store_path: Path) -> tuple[str, int]:
    host, port = FileStore(store_path, timeout=30).get("transport/addr/1").decode().rsplit(":", 1)
    return host, int(port)


def _exchange(transports: dict[int, Transport]) -> np.ndarray:
    payload = np.arange(1000, dtype=np.int32)
    out = np.zeros_like(payload)
    recv = transports[1].irecv(0, memoryview(out).cast("B"), KEY)
    send = transports[0].isend(1, memoryview(payload).cast("B"), KEY)
    transports[0].wait([send], timeout=30)
    transports[1].wait([recv], timeout=30)
    return out


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cleanup() -> Iterator[list[Transport]]:
    made: list[Transport] = []
    yield made
    for transport in made:
        transport.close()


def test_a_connection_with_the_wrong_token_is_refused_and_the_job_still_connects(store_path, cleanup) -> None:
    gate = threading.Event()
    made, errors, threads = _start_pair(store_path, before_rank_0=gate)
    host, port = _rank_1_address(store_path)

    with socket.create_connection((host, port), timeout=10) as stranger:
        # Rank 1 hangs up instead of proving itself to a client that failed its proof.
        with pytest.raises(AuthenticationError, match="closed the connection"):
            auth.handshake(stranger, b"a-guessed-token", b"data", is_server=False, timeout=10)

    gate.set()
    _join(threads)
    assert not errors, errors
    cleanup.extend(made.values())
    assert (_exchange(made) == np.arange(1000, dtype=np.int32)).all()


def test_a_silent_stranger_holding_the_port_does_not_keep_rank_0_out(store_path, cleanup) -> None:
    gate = threading.Event()
    made, errors, threads = _start_pair(store_path, before_rank_0=gate)
    host, port = _rank_1_address(store_path)
    # Connects and then says nothing: the handshake is served off the accept
    # loop, so the real rank 0 is admitted while this one waits.
    with socket.create_connection((host, port), timeout=10):
        gate.set()
        _join(threads)
    assert not errors, errors
    cleanup.extend(made.values())
    assert (_exchange(made) == np.arange(1000, dtype=np.int32)).all()


def test_the_token_holder_cannot_claim_a_rank_that_does_not_dial_this_one(store_path, cleanup) -> None:
    gate = threading.Event()
    made, errors, threads = _start_pair(store_path, before_rank_0=gate)
    host, port = _rank_1_address(store_path)
    # Rank 1 accepts only ranks below it; a client naming rank 5 is dropped.
    with socket.create_connection((host, port), timeout=10) as impostor:
        auth.handshake(impostor, TOKEN, b"data", is_server=False, timeout=10)
        impostor.sendall((5).to_bytes(4, "big"))
        impostor.settimeout(10)
        assert impostor.recv(1) == b"", "rank 1 kept a connection that claimed rank 5"
    gate.set()
    _join(threads)
    assert not errors, errors
    cleanup.extend(made.values())
    assert (_exchange(made) == np.arange(1000, dtype=np.int32)).all()

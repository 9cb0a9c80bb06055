"""Garbage on a rank's store port and data port: nothing is accepted, nothing crashes, the job goes on.

A live 2-rank job (its own token) is fed, on both ports: seeded random bytes,
truncated hellos, the wrong token, a replayed handshake, oversized length
fields and silent (slow-loris) connections. Each connection must be closed by
the rank without an answer that would admit it; afterwards the ranks still
run collectives and the store still serves.
"""

from __future__ import annotations

import random
import re
import socket
import struct

import numpy as np
import pytest

from meshcomm.security import auth
from meshcomm.rendezvous.store_wire import MAX_FRAME, SET
from tests.ranks import Cluster

TOKEN = "fuzz-token"


def _addresses(_) -> dict:
    from meshcomm.api import state

    runtime = state.runtime()
    host, port = runtime.transport.address.rsplit(":", 1)
    return {"store": getattr(runtime.store, "port", None), "data": (host, int(port))}


def _all_reduce_and_store(_) -> tuple:
    import meshcomm as dist
    from meshcomm.api import state

    x = np.full(1000, dist.get_rank() + 1.0)
    dist.all_reduce(x)
    store = state.runtime().store
    store.set(f"fuzz/alive/{dist.get_rank()}", b"yes")
    return float(x[0]), store.get(f"fuzz/alive/{1 - dist.get_rank()}", timeout=10), store.check(["fuzz/evil"])


@pytest.fixture(scope="module")
def job():
    cluster = Cluster(2, env={"MESHCOMM_TOKEN": TOKEN, "MESHCOMM_TIMEOUT": "60"})
    try:
        yield cluster, cluster.run(_addresses, None)
    finally:
        cluster.close()


def ports(job) -> list[tuple[str, tuple[str, int]]]:
    _, addresses = job
    store = ("127.0.0.1", addresses[0]["store"])
    return [("store", store), ("data", addresses[1]["data"])]  # rank 1 accepts data connections (from rank 0)


def send_then_hang_up(sock: socket.socket, payload: bytes) -> bytes:
    """Send `payload` and end our side; return what the rank answered before closing (a rank
    that already closed, which resets the connection, answered nothing)."""
    try:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        return b""
    return hung_up(sock)


def hung_up(sock: socket.socket) -> bytes:
    """Everything the rank sent before closing the connection (must close within 15 s)."""
    sock.settimeout(15)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def server_hello(sock: socket.socket) -> bytes:
    got = b""
    while len(got) < len(auth.MAGIC) + auth.NONCE_BYTES:
        got += sock.recv(len(auth.MAGIC) + auth.NONCE_BYTES - len(got))
    return got[len(auth.MAGIC):]


def client_hello(token: bytes, purpose: bytes, server_nonce: bytes) -> bytes:
    mine = bytes(auth.NONCE_BYTES)
    return auth.MAGIC + mine + auth._digest(token, purpose, server_nonce, b"C")


def assert_job_still_works(job) -> None:
    cluster, _ = job
    for total, other_alive, evil in cluster.run(_all_reduce_and_store, None, timeout=60):
        assert total == 3.0 and other_alive == b"yes" and evil is False


@pytest.mark.timeout(120)
def test_random_bytes_and_truncated_hellos_are_dropped(job) -> None:
    rng = random.Random(8)
    for name, address in ports(job):
        for attempt in range(40):
            payload = rng.randbytes(rng.choice([0, 1, 7, 64, 4096]))
            if attempt % 4 == 0:
                payload = auth.MAGIC[: rng.randrange(len(auth.MAGIC))]  # a truncated hello
            elif attempt % 4 == 1:
                payload = auth.MAGIC + payload  # the right magic, then garbage
            with socket.create_connection(address, timeout=10) as sock:
                server_hello(sock)
                assert send_then_hang_up(sock, payload) == b"", f"{name} port answered garbage {payload[:16]!r}"
    assert_job_still_works(job)


@pytest.mark.timeout(120)
def test_the_wrong_token_and_a_replayed_handshake_are_refused(job) -> None:
    for name, address in ports(job):
        purpose = name.encode()
        with socket.create_connection(address, timeout=10) as sock:
            hello = client_hello(b"not-the-token", purpose, server_hello(sock))
            assert send_then_hang_up(sock, hello) == b"", f"{name} port admitted the wrong token"
        # Record a handshake that works, then replay it on a new connection: the server's nonce differs.
        with socket.create_connection(address, timeout=10) as sock:
            recorded = client_hello(TOKEN.encode(), purpose, server_hello(sock))
            sock.sendall(recorded)
            assert len(sock.recv(auth.DIGEST_BYTES, socket.MSG_WAITALL)) == auth.DIGEST_BYTES
        with socket.create_connection(address, timeout=10) as sock:
            server_hello(sock)
            assert send_then_hang_up(sock, recorded) == b"", f"{name} port admitted a replayed handshake"
    assert_job_still_works(job)


@pytest.mark.timeout(120)
def test_oversized_and_truncated_frames_after_the_handshake_are_dropped(job) -> None:
    (_, store), (_, data) = ports(job)
    cases = [
        struct.pack("!I", 0xFFFFFFFF),  # a length field far beyond any frame
        struct.pack("!I", MAX_FRAME + 1) + b"x" * 64,
        struct.pack("!I", 100) + bytes([SET]) + b"\x00\x00",  # truncated, then the connection ends
        struct.pack("!I", 9) + bytes([SET]) + struct.pack("!I", 1000) + b"evil",  # argument longer than its frame
    ]
    for frame in cases:
        with socket.create_connection(store, timeout=10) as sock:
            auth.handshake(sock, TOKEN.encode(), b"store", False, 10)
            assert send_then_hang_up(sock, frame) == b""
    # The token holder on the data port: a rank that does not dial rank 1, then a header of garbage.
    for claim in (struct.pack("!I", 0), struct.pack("!I", 7), b"\x00\x00"):
        with socket.create_connection(data, timeout=10) as sock:
            auth.handshake(sock, TOKEN.encode(), b"data", False, 10)
            assert send_then_hang_up(sock, claim + b"MC" + bytes(200)) == b""
    assert_job_still_works(job)


@pytest.mark.timeout(120)
def test_silent_connections_do_not_stall_the_ranks(job) -> None:
    silent = []
    try:
        for _, address in ports(job):
            for _ in range(20):
                sock = socket.create_connection(address, timeout=10)
                sock.sendall(auth.MAGIC[:3])  # a hello that never finishes
                silent.append(sock)
        assert_job_still_works(job)
    finally:
        for sock in silent:
            sock.close()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_jobs_under_a_stream_of_junk_connections_exit_0_with_right_results() -> None:
    # A stranger keeps connecting to the store, data and lifeline ports during each job and its teardown
    # (benchmarks/junk_soak.py, which runs many more jobs by hand).
    import sys
    from pathlib import Path

    from tests.ranks import run_command

    soak = Path(__file__).resolve().parents[2] / "benchmarks" / "junk_soak.py"
    done = run_command([sys.executable, str(soak), "--jobs", "4", "--calls", "100"], timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    counts = re.search(r"(\d+) junk connections; 4 exited 0 with right results, 0 did not", done.stdout)
    assert counts is not None and int(counts.group(1)) > 100, done.stdout

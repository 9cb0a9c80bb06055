"""TLS settings and the TLS store: misconfiguration named at init, a TLS-only store, and TlsStream's socket contract."""

from __future__ import annotations

import os
import re
import socket
import ssl
import threading

import pytest

from meshcomm.errors import AuthenticationError
from meshcomm.rendezvous import TCPStore
from meshcomm.security import auth, tls
from tests.ranks import fresh_job_env, run_meshcomm
from tests.tls_helpers import client_context, read_over_tls, read_until_closed, self_signed, tls_env

TOKEN = b"tls-test-token"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    directory = tmp_path_factory.mktemp("certs")
    return {name: self_signed(directory, name) for name in ("job", "stranger")}


@pytest.fixture
def job_tls(monkeypatch: pytest.MonkeyPatch, certs) -> None:
    for name, value in tls_env(*certs["job"]).items():
        monkeypatch.setenv(name, value)


def test_tls_is_off_when_no_variable_is_set() -> None:
    assert tls.from_environment() is None


@pytest.mark.parametrize("variable", ["MESHCOMM_TLS_CERT", "MESHCOMM_TLS_KEY", "MESHCOMM_TLS_CA"])
def test_a_variable_set_alone_is_an_error_naming_it_and_its_path(monkeypatch, certs, variable) -> None:
    cert, _ = certs["job"]
    monkeypatch.setenv(variable, cert)
    with pytest.raises(ValueError, match=re.escape(f"{variable}={cert} is set but ")):
        tls.from_environment()


@pytest.mark.parametrize("variable", ["MESHCOMM_TLS_CERT", "MESHCOMM_TLS_KEY", "MESHCOMM_TLS_CA"])
def test_an_unreadable_file_is_an_error_naming_the_variable_and_path(monkeypatch, certs, tmp_path, variable) -> None:
    for name, value in tls_env(*certs["job"]).items():
        monkeypatch.setenv(name, value)
    missing = str(tmp_path / "missing.pem")
    monkeypatch.setenv(variable, missing)
    with pytest.raises(ValueError, match=re.escape(f"{variable}={missing} cannot be read: No such file")):
        tls.from_environment()


@pytest.mark.parametrize(
    "cert_file, key_file, problem",
    [
        (("job", 0), ("stranger", 1), "MESHCOMM_TLS_CERT={cert} and MESHCOMM_TLS_KEY={key} are not"),
        (("job", 1), ("job", 1), "MESHCOMM_TLS_CERT={cert} holds no certificate"),
    ],
    ids=["key-of-another-certificate", "key-given-as-certificate"],
)
def test_files_that_are_not_a_certificate_and_its_key_are_errors_naming_them(
    monkeypatch, certs, cert_file, key_file, problem
) -> None:
    cert, key = certs[cert_file[0]][cert_file[1]], certs[key_file[0]][key_file[1]]
    monkeypatch.setenv("MESHCOMM_TLS_CERT", cert)
    monkeypatch.setenv("MESHCOMM_TLS_KEY", key)
    with pytest.raises(ValueError, match=re.escape(problem.format(cert=cert, key=key))):
        tls.from_environment()


def test_misconfiguration_stops_the_store_before_it_listens_or_connects(monkeypatch, certs) -> None:
    monkeypatch.setenv("MESHCOMM_TLS_CERT", certs["job"][0])
    threads = threading.active_count()
    with pytest.raises(ValueError, match="MESHCOMM_TLS_KEY is not"):
        TCPStore("127.0.0.1", 0, is_master=True, timeout=5, token=TOKEN)
    assert threading.active_count() == threads  # no server thread was started


def test_a_job_with_half_a_tls_configuration_fails_naming_the_missing_variable(certs, tmp_path) -> None:
    program = tmp_path / "program.py"
    program.write_text("import meshcomm as dist\ndist.init_process_group()\n")
    env = fresh_job_env({"MESHCOMM_TLS_CERT": certs["job"][0]})
    done = run_meshcomm("run", "-n", "2", "--timeout", "30", str(program), env=env, timeout=120)
    assert done.returncode != 0
    assert f"MESHCOMM_TLS_CERT={certs['job'][0]} is set but MESHCOMM_TLS_KEY is not" in done.stderr


@pytest.fixture
def tls_master(job_tls) -> TCPStore:
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, token=TOKEN)
    yield store
    store.close()


def test_the_store_serves_large_values_over_tls(tls_master: TCPStore) -> None:
    value = os.urandom(8 << 20)  # larger than the socket buffers: the server's writes block part-way
    client = TCPStore("127.0.0.1", tls_master.port, timeout=10, token=TOKEN)
    try:
        assert isinstance(client._sock, ssl.SSLSocket)
        client.set("big", value)
        assert tls_master.get("big") == value
        tls_master.set("small", b"x")
        assert client.get("small") == b"x" and client.num_keys() == 2
    finally:
        client.close()


def test_the_store_refuses_a_client_whose_certificate_its_ca_did_not_sign(
    tls_master: TCPStore, monkeypatch, certs
) -> None:
    for name, value in tls_env(*certs["stranger"]).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(AuthenticationError, match="TLS certificate authority"):
        TCPStore("127.0.0.1", tls_master.port, timeout=10, token=TOKEN)
    tls_master.set("still", b"serving")
    assert tls_master.get("still") == b"serving"


def test_the_store_refuses_a_client_it_cannot_verify_even_with_the_token(tls_master: TCPStore, certs) -> None:
    """The stranger trusts the store's certificate but presents its own: the store must drop it."""
    stranger = client_context(certs["job"][0], certs["stranger"])
    assert read_over_tls(stranger, ("127.0.0.1", tls_master.port)) == b""
    assert tls_master.check(["nothing"]) is False


def test_the_store_greets_a_client_holding_the_job_certificate_inside_tls(tls_master: TCPStore, certs) -> None:
    member = client_context(certs["job"][0], certs["job"])
    assert read_over_tls(member, ("127.0.0.1", tls_master.port), len(auth.MAGIC)) == auth.MAGIC


def test_the_store_drops_a_plaintext_client_without_greeting_it(tls_master: TCPStore) -> None:
    with socket.create_connection(("127.0.0.1", tls_master.port), timeout=15) as sock:
        sock.sendall(auth.MAGIC + bytes(auth.NONCE_BYTES + auth.DIGEST_BYTES))
        received = read_until_closed(sock)
    assert auth.MAGIC not in received
    tls_master.set("after", b"plaintext")
    assert tls_master.get("after") == b"plaintext"


@pytest.fixture
def stream_pair(job_tls):
    """Two TlsStreams over a socket pair, as the transport holds them after its handshakes."""
    contexts = tls.from_environment()
    left, right = socket.socketpair()
    done: dict[str, object] = {}
    server = threading.Thread(target=lambda: done.update(server=contexts.handshake(right, True, 10)))
    server.start()
    client = contexts.handshake(left, False, 10)
    server.join(15)
    writer, reader = tls.TlsStream(client), tls.TlsStream(done["server"])
    yield writer, reader
    writer.close()
    reader.close()


def test_a_tls_stream_resumes_blocked_writes_and_reports_exact_byte_counts(stream_pair) -> None:
    writer, reader = stream_pair
    head, payload = os.urandom(40), os.urandom(6 << 20)
    views = [memoryview(head), memoryview(payload)]
    received = bytearray(len(head) + len(payload))
    got, blocked, index = 0, 0, 0
    for _ in range(100_000):  # a bound, never reached: each round moves bytes one way or the other
        if index < len(views):
            try:
                sent = writer.sendmsg(views[index:])
            except BlockingIOError:
                sent, blocked = 0, blocked + 1
                assert writer.mid_write
            while sent:  # advanced as the transport does
                step = min(sent, views[index].nbytes)
                views[index] = views[index][step:]
                sent -= step
                if not views[index].nbytes:
                    index += 1
        try:
            while got < len(received):
                got += reader.recv_into(memoryview(received)[got:])
        except BlockingIOError:
            pass
        if got == len(received):
            break
    assert blocked > 0 and bytes(received) == head + payload


def test_a_tls_stream_reads_the_end_of_its_peer_as_zero_bytes(stream_pair) -> None:
    writer, reader = stream_pair
    with pytest.raises(BlockingIOError):
        reader.recv(10)
    writer.send(b"last words")
    writer.close()
    assert reader.recv(100) == b"last words"
    assert reader.recv_into(memoryview(bytearray(10))) == 0

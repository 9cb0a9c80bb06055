"""connect() turns each init_method into a shared store; join() assembles the ranks or names who is missing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from meshcomm.errors import CommTimeoutError, RendezvousError
from meshcomm.rendezvous import FileStore, Store, StoreServer, TCPStore, connect, join

from .conftest import free_port


def run_ranks(size: int, body, timeout: float = 30) -> dict[int, object]:
    """Run body(rank) on one thread per rank; returns each rank's result or exception."""
    results: dict[int, object] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except BaseException as exc:  # reported to the test
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads)
    return results


def connect_and_join(init_method: str | None, size: int, **kwargs) -> dict[int, object]:
    stores: list[Store] = []

    def body(rank: int) -> tuple[int, int, bytes]:
        store, r, n = connect(init_method, rank=rank, world_size=size, timeout=20, **kwargs)
        stores.append(store)
        join(store, r, n, timeout=20)
        store.set(f"val/{r}", str(r))
        store.wait([f"val/{i}" for i in range(n)], timeout=20)
        return r, n, store.get("rdzv/count")

    try:
        return run_ranks(size, body)
    finally:
        # Clients first: the rank-0 store hosts the server.
        for store in sorted(stores, key=lambda s: getattr(s, "_server", None) is not None):
            store.close()


def test_tcp_init_method_with_rank_0_hosting(token_env: None) -> None:
    results = connect_and_join(f"tcp://127.0.0.1:{free_port()}", 3)
    assert results == {r: (r, 3, b"3") for r in range(3)}


def test_env_init_method_reads_master_addr_and_port(monkeypatch: pytest.MonkeyPatch, token_env: None) -> None:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    results = connect_and_join(None, 2)
    assert results == {r: (r, 2, b"2") for r in range(2)}


def test_file_init_method(tmp_path: Path) -> None:
    results = connect_and_join(f"file://{tmp_path}/rdzv", 3)
    assert results == {r: (r, 3, b"3") for r in range(3)}


def test_external_store_makes_every_rank_a_client(monkeypatch: pytest.MonkeyPatch, token_env: None) -> None:
    monkeypatch.setenv("MESHCOMM_STORE", "external")
    server = StoreServer("127.0.0.1", 0, b"env-token")
    server.start()
    try:
        results = connect_and_join(f"tcp://127.0.0.1:{server.port}", 2)
        assert results == {r: (r, 2, b"2") for r in range(2)}
    finally:
        server.close()


def test_rank_and_size_in_the_url_query(tmp_path: Path) -> None:
    store, rank, size = connect(f"file://{tmp_path}/q?rank=1&world_size=2", timeout=5)
    assert (rank, size) == (1, 2)
    assert isinstance(store, FileStore)
    store.close()


def test_missing_rank_fails_within_the_timeout_naming_it(master: TCPStore, token: bytes) -> None:
    clients = {r: TCPStore("127.0.0.1", master.port, timeout=10, token=token) for r in (1, 3)}
    stores = {0: master, **clients}
    try:
        start = time.monotonic()
        results = run_ranks(4, lambda r: join(stores[r], r, 4, timeout=0.5) if r in stores else None)
        assert time.monotonic() - start < 15
        for r in stores:
            assert isinstance(results[r], RendezvousError)
            assert "rendezvous timed out after 0.5 s: 3/4 ranks joined, missing [2]" in str(results[r])
    finally:
        for c in clients.values():
            c.close()


class _GivesUpAfterAnother:
    """A store whose wait times out just after another rank, timing out first, filled the missing keys."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def wait(self, keys, timeout=None) -> None:
        verdict = "rendezvous timed out after 0.5 s: 2/3 ranks joined, missing [2]"
        self._store.compare_set("rdzv/verdict", b"", verdict.encode())
        self._store.compare_set("rdzv/rank/2", b"", b"meshcomm: the rendezvous already failed: " + verdict.encode())
        raise CommTimeoutError("timed out")


def test_a_rank_timing_out_just_after_another_reports_its_verdict(tmp_path: Path) -> None:
    # Ranks sharing one timeout give up together; the second one to look found every key set (the first had
    # filled the missing ones) and returned as if the rendezvous had succeeded.
    store = FileStore(str(tmp_path / "rdzv"), 5)
    try:
        store.compare_set("rdzv/rank/0", b"", b"rank 0")
        with pytest.raises(RendezvousError, match=r"^rendezvous timed out after 0.5 s: 2/3 ranks joined, missing \[2\]$"):
            join(_GivesUpAfterAnother(store), 1, 3, timeout=0.5)
    finally:
        store.close()


def test_every_waiting_rank_names_the_missing_ranks_when_one_gives_up(master: TCPStore, token: bytes) -> None:
    """The store's host gives up first (its timeout is the shortest): the others, still willing to wait, learn why."""
    clients = {r: TCPStore("127.0.0.1", master.port, timeout=60, token=token) for r in (1, 3)}
    stores = {0: master, **clients}
    timeouts = {0: 0.5, 1: 60.0, 3: 60.0}
    try:
        start = time.monotonic()
        results = run_ranks(4, lambda r: join(stores[r], r, 4, timeout=timeouts[r]) if r in stores else None)
        assert time.monotonic() - start < 15  # not the others' 60 s
        for r in stores:
            assert isinstance(results[r], RendezvousError), results[r]
            assert str(results[r]) == "rendezvous timed out after 0.5 s: 3/4 ranks joined, missing [2]"
        late = TCPStore("127.0.0.1", master.port, timeout=10, token=token)
        with pytest.raises(RendezvousError, match=r"^rendezvous timed out after 0.5 s: 3/4 ranks joined, missing \[2\]$"):
            join(late, 2, 4, timeout=30)  # the missing rank, arriving after the verdict
        late.close()
    finally:
        for c in clients.values():
            c.close()


def test_a_rank_that_loses_the_store_while_waiting_says_where_the_rendezvous_failed(token: bytes) -> None:
    """Rank 0 serves the store and leaves when its own wait times out: the ranks waiting on it lose the store."""
    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, token=token)
    client = TCPStore("127.0.0.1", master.port, timeout=10, token=token)
    try:
        closer = threading.Timer(0.3, master.close)
        closer.start()
        with pytest.raises(RendezvousError, match=r"rank 1 lost the store while it waited for all 3 ranks to join "
                                                  r"\(.*\): the rendezvous failed where the store runs"):
            join(client, 1, 3, timeout=20)
        closer.join()
    finally:
        client.close()
        master.close()


def test_a_second_process_claiming_a_rank_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FileStore(tmp_path / "dup", timeout=5) as store:
        store.set("rdzv/rank/0", b"otherhost:1234:abcd")
        with pytest.raises(RendezvousError, match=r"rank 0 is already claimed by another process \(otherhost:1234:abcd\)"):
            join(store, 0, 2, timeout=1)


def test_world_size_disagreement_is_reported(tmp_path: Path) -> None:
    with FileStore(tmp_path / "ws", timeout=5) as store:
        store.set("rdzv/world_size", b"8")
        with pytest.raises(RendezvousError, match="world_size mismatch: rank 1 says 4, but another rank joined with 8"):
            join(store, 1, 4, timeout=1)


def test_single_rank_joins_alone(tmp_path: Path) -> None:
    with FileStore(tmp_path / "one", timeout=5) as store:
        join(store, 0, 1, timeout=1)


@pytest.mark.parametrize(
    "init_method, match",
    [
        ("http://x:1", "must start with env://, tcp:// or file://"),
        ("tcp://hostonly", "tcp://host:port"),
        ("tcp://h:notaport", "bad port"),
        ("file://", "file:///absolute/path"),
    ],
)
def test_bad_init_methods_are_rejected_by_name(init_method: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        connect(init_method, rank=0, world_size=1, timeout=1)


def test_env_without_master_address_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT"):
        connect(None, rank=0, world_size=2, timeout=1)


def test_tcp_without_rank_names_where_it_looked() -> None:
    with pytest.raises(ValueError, match="pass rank= or set one of MESHCOMM_RANK"):
        connect("tcp://127.0.0.1:1", timeout=1)


def test_store_and_init_method_are_exclusive(tmp_path: Path) -> None:
    with FileStore(tmp_path / "s", timeout=5) as store:
        assert connect(store=store, rank=1, world_size=2) == (store, 1, 2)
        with pytest.raises(ValueError, match="either init_method or store"):
            connect("env://", store=store, rank=0, world_size=1)


def test_bad_store_mode_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESHCOMM_STORE", "remote")
    with pytest.raises(ValueError, match="MESHCOMM_STORE must be '' or 'external', got 'remote'"):
        connect("tcp://127.0.0.1:1", rank=0, world_size=1, timeout=1)


def test_public_api_is_exactly_all() -> None:
    import meshcomm.rendezvous as rdzv

    public = {name for name in vars(rdzv) if not name.startswith("_")}
    modules = {"agreement", "environment", "file_store", "init_method", "lifeline", "pmi", "store", "store_server",
               "store_wire", "tcp_store", "torch_store"}
    assert public - modules == set(rdzv.__all__)

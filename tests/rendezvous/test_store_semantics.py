"""Every Store backend honours the same torch-like semantics."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from meshcomm.errors import CommTimeoutError
from meshcomm.rendezvous import FileStore, PrefixStore, Store, TCPStore, TorchStore
from tests.ranks import run_function

HAS_TORCH = importlib.util.find_spec("torch") is not None
KINDS = ["tcp", "file", "prefix-tcp", "prefix-file"] + (["torch"] if HAS_TORCH else [])


@pytest.fixture(params=KINDS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """Two handles (as two ranks would hold) on one fresh store."""
    kind = request.param
    closers = []
    if kind.endswith("tcp"):
        a = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, token=b"t")
        b = TCPStore("127.0.0.1", a.port, timeout=10, token=b"t")
    elif kind.endswith("file"):
        a, b = FileStore(tmp_path / "store", timeout=10), FileStore(tmp_path / "store", timeout=10)
    else:
        import torch.distributed as dist

        host = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10), wait_for_workers=False)
        a, b = TorchStore(host, 10), TorchStore.connect("127.0.0.1", host.port, 10)
    closers = [b, a]
    if kind.startswith("prefix"):
        a, b = PrefixStore("job", a), PrefixStore("job", b)
    yield a, b
    for store in closers:
        store.close()


def test_set_get_round_trips_bytes_and_encodes_str(pair: tuple[Store, Store]) -> None:
    a, b = pair
    a.set("k", b"\x00\xffbytes")
    a.set("s", "héllo")
    assert b.get("k") == b"\x00\xffbytes"
    assert b.get("s") == "héllo".encode()
    a.set("k", b"")
    assert b.get("k") == b""


def test_add_counts_in_ascii_decimal(pair: tuple[Store, Store]) -> None:
    a, b = pair
    assert a.add("n", 5) == 5
    assert b.add("n", -7) == -2
    assert a.get("n") == b"-2"
    a.set("m", "40")
    assert b.add("m", 2) == 42


def test_add_to_a_non_counter_is_a_value_error(pair: tuple[Store, Store]) -> None:
    a, _ = pair
    a.set("text", b"abc")
    with pytest.raises((ValueError, RuntimeError)):
        a.add("text", 1)


def test_compare_set_follows_torch(pair: tuple[Store, Store]) -> None:
    a, b = pair
    assert a.compare_set("c", b"", b"first") == b"first"
    assert b.compare_set("c", b"wrong", b"second") == b"first"
    assert b.compare_set("c", "first", "second") == b"second"
    # Absent key with a non-empty expectation: nothing is stored and `expected` comes back.
    assert a.compare_set("absent", b"x", b"y") == b"x"
    assert not a.check(["absent"])


def test_check_delete_and_num_keys(pair: tuple[Store, Store]) -> None:
    a, b = pair
    before = a.num_keys()
    a.set("x", b"1")
    a.set("y", b"2")
    assert b.check(["x", "y"]) and not b.check(["x", "z"])
    assert a.num_keys() == before + 2
    assert b.delete_key("x") is True
    assert b.delete_key("x") is False
    assert not a.check(["x"])
    assert a.num_keys() == before + 1


def test_blocking_get_is_released_by_a_later_set(pair: tuple[Store, Store]) -> None:
    a, b = pair
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(b.get("late", timeout=20)))
    reader.start()
    a.set("late", b"value")
    reader.join(30)
    assert not reader.is_alive()
    assert got == [b"value"]


def test_wait_returns_once_every_key_exists(pair: tuple[Store, Store]) -> None:
    a, b = pair
    waiter = threading.Thread(target=b.wait, args=(["w1", "w2"], 20))
    waiter.start()
    a.set("w1", b"")
    a.set("w2", b"")
    waiter.join(30)
    assert not waiter.is_alive()


def test_wait_timeout_names_the_missing_keys(pair: tuple[Store, Store]) -> None:
    a, _ = pair
    a.set("here", b"1")
    start = time.monotonic()
    with pytest.raises(CommTimeoutError, match=r"missing keys \['gone1', 'gone2'\]"):
        a.wait(["here", "gone1", "gone2"], timeout=0.2)
    assert time.monotonic() - start < 10


def test_get_timeout_names_the_key(pair: tuple[Store, Store]) -> None:
    a, _ = pair
    with pytest.raises(CommTimeoutError, match="'never'"):
        a.get("never", timeout=0.2)


def test_keys_must_be_str_and_wait_rejects_a_bare_str(pair: tuple[Store, Store]) -> None:
    a, _ = pair
    with pytest.raises(TypeError, match="key must be str"):
        a.set(b"k", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of str"):
        a.wait("abc", timeout=0.1)
    with pytest.raises(TypeError, match="value must be bytes or str"):
        a.set("k", 3)  # type: ignore[arg-type]


def test_prefix_store_prefixes_every_key(tmp_path: Path) -> None:
    with FileStore(tmp_path / "f", timeout=5) as base:
        view = PrefixStore("grp", base)
        view.set("a", b"1")
        view.add("n", 2)
        assert base.get("grp/a") == b"1"
        assert base.get("grp/n") == b"2"
        assert view.check(["a"]) and not base.check(["a"])
        with pytest.raises(CommTimeoutError, match=r"\['b'\]"):
            view.wait(["a", "b"], timeout=0.1)
        view.close()
        assert base.get("grp/a") == b"1"  # closing a view leaves the store open


def test_one_tcp_client_is_safe_to_share_between_threads(master: TCPStore, token: bytes) -> None:
    client = TCPStore("127.0.0.1", master.port, timeout=10, token=token)
    workers = [threading.Thread(target=lambda: [client.add("shared", 1) for _ in range(50)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert not any(w.is_alive() for w in workers)
    assert master.get("shared") == b"200"
    client.close()


def test_many_tcp_clients_in_threads_see_one_store(master: TCPStore, token: bytes) -> None:
    clients = [TCPStore("127.0.0.1", master.port, timeout=10, token=token) for _ in range(6)]

    def run(i: int, store: TCPStore) -> None:
        store.set(f"from/{i}", str(i))
        store.add("count", 1)
        store.wait([f"from/{j}" for j in range(len(clients))], timeout=20)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert master.get("count") == b"6"
    for c in clients:
        c.close()


def _worker(rank: int, size: int, kind: str, where: str) -> None:
    if kind == "tcp":
        store: Store = TCPStore("127.0.0.1", int(where), timeout=20, token=b"test-token")
    else:
        store = FileStore(where, timeout=20)
    store.set(f"rank/{rank}", str(rank * 10))
    store.add("joined", 1)
    store.wait([f"rank/{r}" for r in range(size)], timeout=20)
    total = sum(int(store.get(f"rank/{r}")) for r in range(size))
    store.set(f"sum/{rank}", str(total))
    store.close()


def _run_processes(kind: str, where: str, size: int) -> None:
    assert run_function(_worker, size, kind, where, timeout=60) == [None] * size


@pytest.mark.parametrize("kind", ["tcp", "file"])
def test_store_shared_by_spawned_processes(kind: str, master: TCPStore, tmp_path: Path) -> None:
    size = 3
    if kind == "tcp":
        store: Store = master
        where = str(master.port)
    else:
        where = str(tmp_path / "mp-store")
        store = FileStore(where, timeout=20)
    _run_processes(kind, where, size)
    assert store.get("joined") == b"3"
    assert [store.get(f"sum/{r}") for r in range(size)] == [b"30"] * size

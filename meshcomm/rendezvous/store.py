"""The key-value Store API every rendezvous backend implements, and PrefixStore."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from types import TracebackType

from meshcomm.errors import CommTimeoutError


def as_key(key: str) -> str:
    """Check a key: keys are str, so every backend and the wire agree on them."""
    if not isinstance(key, str):
        raise TypeError(f"store key must be str, got {type(key).__name__}")
    return key


def as_value(value: bytes | bytearray | memoryview | str, name: str = "value") -> bytes:
    """Values are bytes; str is accepted and encoded as UTF-8, as torch does."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"store {name} must be bytes or str, got {type(value).__name__}")


def as_keys(keys: Sequence[str]) -> list[str]:
    if isinstance(keys, str):
        # A bare string would otherwise be waited on letter by letter.
        raise TypeError(f"keys must be a list of str, got the str {keys!r}")
    return [as_key(k) for k in keys]


def as_timeout(timeout: float | None, default: float) -> float:
    value = default if timeout is None else float(timeout)
    if value < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {value}")
    return value


def get_timeout_error(key: str, timeout: float) -> CommTimeoutError:
    return CommTimeoutError(f"store get({key!r}) timed out after {timeout:g} s: the key was never set")


def wait_timeout_error(missing: Sequence[str], timeout: float) -> CommTimeoutError:
    return CommTimeoutError(f"store wait timed out after {timeout:g} s: missing keys {list(missing)!r}")


def add_result(current: bytes | None, key: str, amount: int) -> bytes:
    """The counter after adding: ASCII decimal like torch, so both stores interoperate."""
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise TypeError(f"add amount must be int, got {type(amount).__name__}")
    if current is None:
        return str(amount).encode()
    try:
        value = int(current.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"store key {key!r} holds {current[:40]!r}, not a decimal counter") from None
    return str(value + amount).encode()


def compare_set_result(current: bytes | None, expected: bytes, desired: bytes) -> bytes | None:
    """What compare_set stores, or None to leave the key as it is (torch semantics)."""
    if (current is None and expected == b"") or (current is not None and current == expected):
        return desired
    return None


def wait_for_keys(store: "Store", keys: Sequence[str], deadline: float, between: Callable[[list[int]], None],
                  look_every: float) -> list[int]:
    """Until every key of `keys` is in `store`, looking every `look_every` seconds; between looks,
    `between(missing)` (indices into `keys`) may raise, e.g. for a rank known lost. Returns [] once all are
    there, or the indices still missing at `deadline` (time.monotonic()). The store's errors propagate."""
    while True:
        try:
            store.wait(keys, min(look_every, max(deadline - time.monotonic(), 0.001)))
            return []
        except CommTimeoutError:
            missing = [i for i, key in enumerate(keys) if not store.check([key])]
            if time.monotonic() >= deadline:
                return missing
            between(missing)


class Store(abc.ABC):
    """A key-value store shared by the ranks of a job (str keys, bytes values).

    Blocking calls wait at most `timeout` seconds (the argument, else the
    store's own `timeout` attribute) and then raise CommTimeoutError naming
    what never appeared.
    """

    timeout: float

    @abc.abstractmethod
    def set(self, key: str, value: bytes | str) -> None:
        """Store value under key, replacing what was there."""

    @abc.abstractmethod
    def get(self, key: str, timeout: float | None = None) -> bytes:
        """The value of key, blocking until some rank sets it."""

    @abc.abstractmethod
    def add(self, key: str, amount: int) -> int:
        """Atomically add amount to the counter at key (absent = 0); returns the new value."""

    @abc.abstractmethod
    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        """Set desired if key holds expected (or is absent and expected is empty); returns the value now stored."""

    @abc.abstractmethod
    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        """Block until every key exists."""

    @abc.abstractmethod
    def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists, without waiting."""

    @abc.abstractmethod
    def delete_key(self, key: str) -> bool:
        """Remove key; returns whether it existed."""

    @abc.abstractmethod
    def num_keys(self) -> int:
        """How many keys the store holds."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (and a hosted server); further calls are errors."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class PrefixStore(Store):
    """A view of another store with every key prefixed by f"{prefix}/".

    Lets groups and retries share one store without their keys colliding.
    close() leaves the underlying store open: it belongs to whoever made it.
    """

    def __init__(self, prefix: str, store: Store) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be str, got {type(prefix).__name__}")
        if not isinstance(store, Store):
            raise TypeError(f"store must be a meshcomm Store, got {type(store).__name__}")
        self.prefix = prefix
        self.store = store

    @property
    def timeout(self) -> float:  # type: ignore[override]
        return self.store.timeout

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{as_key(key)}"

    def set(self, key: str, value: bytes | str) -> None:
        self.store.set(self._key(key), value)

    def get(self, key: str, timeout: float | None = None) -> bytes:
        try:
            return self.store.get(self._key(key), timeout)
        except CommTimeoutError:
            raise get_timeout_error(key, as_timeout(timeout, self.timeout)) from None

    def add(self, key: str, amount: int) -> int:
        return self.store.add(self._key(key), amount)

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        return self.store.compare_set(self._key(key), expected, desired)

    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        prefixed = [self._key(k) for k in as_keys(keys)]
        try:
            self.store.wait(prefixed, timeout)
        except CommTimeoutError:
            # Re-raise with the caller's own key names, not the prefixed ones.
            missing = [k for k, p in zip(keys, prefixed) if not self.store.check([p])]
            raise wait_timeout_error(missing, as_timeout(timeout, self.timeout)) from None

    def check(self, keys: Sequence[str]) -> bool:
        return self.store.check([self._key(k) for k in as_keys(keys)])

    def delete_key(self, key: str) -> bool:
        return self.store.delete_key(self._key(key))

    def num_keys(self) -> int:
        """Keys of the whole underlying store, as in torch (counting one prefix would need a scan)."""
        return self.store.num_keys()

    def close(self) -> None:
        pass

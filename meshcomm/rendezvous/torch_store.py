"""TorchStore: our Store API over a torch.distributed store, for jobs whose agent (torchrun) already hosts one."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from meshcomm.rendezvous.store import (
    Store,
    as_key,
    as_keys,
    as_timeout,
    as_value,
    get_timeout_error,
    wait_timeout_error,
)


def _is_timeout(exc: BaseException) -> bool:
    # torch raises DistStoreError for timeouts and for other store failures alike;
    # only the message tells them apart.
    return "timeout" in str(exc).lower() or "timed out" in str(exc).lower()


class TorchStore(Store):
    """Adapts a torch.distributed.Store. torch's TCPStore has no authentication:
    under torchrun the job token does not protect the store."""

    def __init__(self, store: Any, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.store = store
        self.timeout = float(timeout)

    @classmethod
    def connect(cls, host: str, port: int, timeout: float, world_size: int | None = None) -> TorchStore:
        """A client of the torch TCPStore at host:port (the torchrun agent's store)."""
        import torch.distributed as dist  # only jobs under torchrun pay for importing torch

        client = dist.TCPStore(
            host, port, world_size, False, datetime.timedelta(seconds=timeout), wait_for_workers=False
        )
        return cls(client, timeout)

    def _wait(self, keys: list[str], timeout: float) -> bool:
        """False when the keys did not all appear in time."""
        try:
            self.store.wait(keys, datetime.timedelta(seconds=timeout))
        except RuntimeError as exc:
            if _is_timeout(exc):
                return False
            raise
        return True

    def set(self, key: str, value: bytes | str) -> None:
        self.store.set(as_key(key), as_value(value))

    def get(self, key: str, timeout: float | None = None) -> bytes:
        wait = as_timeout(timeout, self.timeout)
        # torch's get() only knows the store-wide timeout; wait() takes ours.
        if not self._wait([as_key(key)], wait):
            raise get_timeout_error(key, wait)
        return bytes(self.store.get(key))

    def add(self, key: str, amount: int) -> int:
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"add amount must be int, got {type(amount).__name__}")
        return int(self.store.add(as_key(key), amount))

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        return bytes(self.store.compare_set(as_key(key), as_value(expected, "expected"), as_value(desired, "desired")))

    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        names = as_keys(keys)
        wait = as_timeout(timeout, self.timeout)
        if not self._wait(names, wait):
            raise wait_timeout_error([k for k in names if not self.store.check([k])], wait)

    def check(self, keys: Sequence[str]) -> bool:
        return bool(self.store.check(as_keys(keys)))

    def delete_key(self, key: str) -> bool:
        return bool(self.store.delete_key(as_key(key)))

    def num_keys(self) -> int:
        return int(self.store.num_keys())

    def close(self) -> None:
        # torch stores close when garbage-collected; drop our reference.
        self.store = None


"""FileStore: a Store kept in one append-only file on a filesystem every rank shares."""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from meshcomm.rendezvous.store import (
    Store,
    add_result,
    as_key,
    as_keys,
    as_timeout,
    as_value,
    compare_set_result,
    get_timeout_error,
    wait_timeout_error,
)

# Record: kind (b"S" set / b"D" delete) | u32 key length | u32 value length | key | value.
_HEADER = struct.Struct("!cII")
_SET, _DELETE = b"S", b"D"
# Polling starts fast (a rendezvous is usually a few ms apart) and backs off.
_FIRST_POLL, _MAX_POLL = 0.001, 0.05


class FileStore(Store):
    """Every change is a record appended under an exclusive flock; readers replay new records.

    The file is not removed on close (other ranks may still read it): use a
    fresh path per job, or a previous job's keys are still there.
    """

    def __init__(self, path: str | os.PathLike[str], timeout: float = 300.0) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.path = os.fspath(path)
        self.timeout = float(timeout)
        # 0o600: only the job's own user may read or forge its rendezvous.
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        # flock is shared by every thread holding this descriptor, so threads also need a lock.
        self._lock = threading.Lock()
        self._state: dict[str, bytes] = {}
        self._offset = 0

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[dict[str, bytes]]:
        with self._lock:
            if self._fd < 0:
                raise RuntimeError(f"the FileStore at {self.path} is closed")
            fcntl.flock(self._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                self._refresh()
                yield self._state
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _refresh(self) -> None:
        size = os.fstat(self._fd).st_size
        if size < self._offset:
            # The file was truncated or replaced: start over.
            self._state, self._offset = {}, 0
        if size == self._offset:
            return
        data = os.pread(self._fd, size - self._offset, self._offset)
        pos = 0
        while pos + _HEADER.size <= len(data):
            kind, klen, vlen = _HEADER.unpack_from(data, pos)
            end = pos + _HEADER.size + klen + vlen
            if end > len(data):
                break  # a writer that died mid-record; never counted
            key = data[pos + _HEADER.size : pos + _HEADER.size + klen].decode()
            if kind == _SET:
                self._state[key] = data[pos + _HEADER.size + klen : end]
            elif kind == _DELETE:
                self._state.pop(key, None)
            else:
                raise ValueError(f"{self.path} is not a meshcomm FileStore (record kind {kind!r} at byte {self._offset + pos})")
            pos = end
        self._offset += pos

    def _append(self, kind: bytes, key: str, value: bytes = b"") -> None:
        raw = key.encode()
        record = _HEADER.pack(kind, len(raw), len(value)) + raw + value
        view = memoryview(record)
        while view:
            view = view[os.write(self._fd, view) :]
        # We hold the exclusive lock, so nothing was appended between refresh and now.
        self._offset += len(record)
        if kind == _SET:
            self._state[key] = value
        else:
            self._state.pop(key, None)

    def _poll(self, keys: list[str], timeout: float) -> list[str]:
        """Wait until keys exist; returns the ones still missing at the deadline."""
        deadline = time.monotonic() + timeout
        delay = _FIRST_POLL
        while True:
            with self._locked(exclusive=False) as state:
                missing = [k for k in keys if k not in state]
            remaining = deadline - time.monotonic()
            if not missing or remaining <= 0:
                return missing
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL)

    def set(self, key: str, value: bytes | str) -> None:
        key, data = as_key(key), as_value(value)
        with self._locked(exclusive=True):
            self._append(_SET, key, data)

    def get(self, key: str, timeout: float | None = None) -> bytes:
        wait = as_timeout(timeout, self.timeout)
        if self._poll([as_key(key)], wait):
            raise get_timeout_error(key, wait)
        with self._locked(exclusive=False) as state:
            return state[key]

    def add(self, key: str, amount: int) -> int:
        key = as_key(key)
        with self._locked(exclusive=True) as state:
            new = add_result(state.get(key), key, amount)
            self._append(_SET, key, new)
        return int(new)

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        key, old, new = as_key(key), as_value(expected, "expected"), as_value(desired, "desired")
        with self._locked(exclusive=True) as state:
            result = compare_set_result(state.get(key), old, new)
            if result is not None:
                self._append(_SET, key, result)
            # As torch: an absent key with a non-empty expected value answers `expected`.
            return state.get(key, old)

    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        wait = as_timeout(timeout, self.timeout)
        missing = self._poll(as_keys(keys), wait)
        if missing:
            raise wait_timeout_error(missing, wait)

    def check(self, keys: Sequence[str]) -> bool:
        names = as_keys(keys)
        with self._locked(exclusive=False) as state:
            return all(k in state for k in names)

    def delete_key(self, key: str) -> bool:
        key = as_key(key)
        with self._locked(exclusive=True) as state:
            if key not in state:
                return False
            self._append(_DELETE, key)
            return True

    def num_keys(self) -> int:
        with self._locked(exclusive=False) as state:
            return len(state)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

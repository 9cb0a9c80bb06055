"""The flight recorder's ring in pure Python: what native/records.c keeps in C, for the pure-Python path.

A record is a list (appending one is the cheapest record there is in Python),
[group, seq, what, algorithm, peers, state, started, ended, error], and the
list itself is its handle. Both rings answer alike: `rows` and `row` give
copies, so a record read is never changed by a later call.
"""

from __future__ import annotations

import collections
import time


class Records:
    """The last `capacity` records, oldest first, and each group's latest collective beyond them."""

    def __init__(self, capacity: int, states: tuple[str, str, str]) -> None:
        if capacity < 1 or len(states) != 3:
            raise ValueError("Records(capacity, states): capacity >= 1, and 3 states")
        self._ring: collections.deque = collections.deque(maxlen=capacity)
        self._latest: dict[str, list] = {}
        self._started, self._done, self._failed = states

    def start(self, group: str, seq: int | None, what, algorithm: str, peers: tuple) -> list:
        record = [group, seq, what, algorithm, peers, self._started, time.time(), None, None]
        self._ring.append(record)
        if seq is not None:
            self._latest[group] = record
        return record

    def finish(self, record: list, error: str | None = None) -> None:
        record[7] = time.time()
        record[5] = self._done if error is None else self._failed
        record[8] = error

    def rows(self) -> list[list]:
        return [list(record) for record in list(self._ring)]

    def row(self, record: list) -> list | None:
        return list(record) if any(kept is record for kept in self._ring) else None

    def latest(self, group: str) -> list | None:
        record = self._latest.get(group)
        return None if record is None else list(record)

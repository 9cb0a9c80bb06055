"""The order a communicator's collectives run in, nonblocking ones included.

MPI lets a rank start a collective (Ibcast, or a persistent request's Start)
and go on with other work; every rank must start its collectives in the same
order. Each communicator therefore has one lane: a started collective joins
it and a thread runs it, and a blocking collective runs on the caller's
thread when the lane is empty, or joins it and waits when it is not. The
collectives a lane runs are the blocking ones, so both kinds share one code
path, and one rank's order is every rank's order. See docs/mpi.md.
"""

from __future__ import annotations

import queue
import threading
import weakref
from typing import Callable

from meshcomm.group.work import QueuedWork

_lanes: "weakref.WeakKeyDictionary[object, Lane]" = weakref.WeakKeyDictionary()
# ULFM's nonblocking agreements keep an order of their own, outside the collectives' (ulfm.py).
_agreement_lanes: "weakref.WeakKeyDictionary[object, Lane]" = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


class Lane:
    """One communicator's collectives, in issue order."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pending = 0  # started and not yet finished
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue | None = None
        self._thread: threading.Thread | None = None

    def run(self, body: Callable[[], object]) -> object:
        """Run a blocking collective: now when nothing started before it is still running, else after it."""
        if self._pending == 0 or threading.current_thread() is self._thread:
            return body()
        return self.start(body, "a blocking collective").result()

    def start(self, body: Callable[[], object], description: str) -> QueuedWork:
        """Run `body` after every collective started before it; the work completes when it has."""
        work = QueuedWork(f"{description} on {self._name}")
        with self._lock:
            self._pending += 1
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._drain, name=f"meshcomm-mpi-{self._name}", daemon=True)
            self._thread.start()
        self._queue.put((work, body))
        return work

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, body = item
            try:
                work._result = body()
                error = None
            except BaseException as exc:  # handed to whoever waits on the request
                error = exc
            with self._lock:
                self._pending -= 1
            work._finish(error)

    def close(self) -> None:
        if self._queue is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._queue = None


def lane(group) -> Lane:
    """The lane of this group's collectives (made on first use)."""
    found = _lanes.get(group)
    if found is None:
        with _lanes_lock:
            found = _lanes.setdefault(group, Lane(group.group_name))
    return found


def agreement_lane(group) -> Lane:
    """The lane of this group's nonblocking agreements (made on first use), beside its collectives' lane."""
    with _lanes_lock:
        found = _agreement_lanes.get(group)
        if found is None:
            found = _agreement_lanes[group] = Lane(f"{group.group_name}-agreements")
    return found


def close(group) -> None:
    for lanes in (_lanes, _agreement_lanes):
        found = lanes.pop(group, None)
        if found is not None:
            found.close()

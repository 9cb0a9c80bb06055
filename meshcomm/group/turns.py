"""Turns: the sequence numbers of a group's collectives, and how many of its calls wait on its worker.

The compiled twin (native.core.Turns) is the one a lane takes its numbers from
without a lock; this one serves the pure-Python path, where the group calls it
under its own lock.
"""

from __future__ import annotations


class Turns:
    def __init__(self) -> None:
        self.next = 0
        self.pending = 0

    def take(self, queue: bool) -> tuple[int, bool]:
        """The next call's number, and whether it goes to the worker: when asked, or when calls wait there."""
        seq = self.next
        self.next = seq + 1
        queued = bool(queue) or self.pending > 0
        if queued:
            self.pending += 1
        return seq, queued

    def take_now(self) -> int | None:
        """The number of a call run at once, or None when calls wait on the worker (it must queue behind them)."""
        if self.pending > 0:
            return None
        seq = self.next
        self.next = seq + 1
        return seq

    def done(self) -> None:
        """A call the worker ran finished."""
        self.pending -= 1

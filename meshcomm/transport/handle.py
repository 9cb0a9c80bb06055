"""A handle on one posted send or receive: done, failed, or still moving."""

from __future__ import annotations


class Handle:
    __slots__ = ("kind", "peer", "nbytes", "done", "error", "source")

    def __init__(self, kind: str, peer: int | None, nbytes: int) -> None:
        self.kind = kind
        self.peer = peer
        self.nbytes = nbytes
        self.done = False
        self.error: Exception | None = None
        self.source: int | None = peer  # for a receive from any peer: who it came from

    def complete(self) -> None:
        self.done = True

    def fail(self, error: Exception) -> None:
        if not self.done:
            self.error = error
            self.done = True

    def __repr__(self) -> str:
        state = "failed" if self.error else ("done" if self.done else "pending")
        return f"<Handle {self.kind} peer={self.peer} {self.nbytes} B {state}>"

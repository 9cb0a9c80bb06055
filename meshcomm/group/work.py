"""Work: the handle an async operation returns, torch.distributed style."""

from __future__ import annotations

import threading
from typing import Any, Callable

from meshcomm.errors import CommTimeoutError


class Work:
    """Completes when its operation finished; `wait` re-raises the operation's failure."""

    def __init__(self, description: str, result: Any = None) -> None:
        self.description = description
        self._result = result
        self._event = threading.Event()
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["Work"], None]] = []
        self._lock = threading.Lock()

    @classmethod
    def completed(cls, description: str, result: Any = None) -> "Work":
        work = cls(description, result)
        work._finish(None)
        return work

    def _finish(self, error: BaseException | None) -> None:
        with self._lock:
            self._error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until done (at most `timeout` seconds when given); raise its error if it failed."""
        if not self._event.wait(timeout):
            raise CommTimeoutError(f"{self.description} did not complete within {timeout} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._event.is_set()

    def is_success(self) -> bool:
        return self._event.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> Any:
        self.wait()
        return self._result

    def add_done_callback(self, callback: Callable[["Work"], None]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def get_future(self):
        """A torch.futures.Future completed with the result (needs torch)."""
        import torch.futures

        future = torch.futures.Future()

        def settle(work: "Work") -> None:
            if work._error is not None:
                future.set_exception(work._error)
            else:
                future.set_result(work._result)

        self.add_done_callback(settle)
        return future

    def __repr__(self) -> str:
        state = "failed" if self._error else ("done" if self.is_completed() else "pending")
        return f"<Work {self.description} {state}>"

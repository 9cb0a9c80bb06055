"""The Work family: what an operation started without waiting returns, torch.distributed style.

Two kinds complete differently. A `QueuedWork` is a collective on the
group's worker thread: it completes by itself, in issue order. A
`MessageWork` is a point-to-point message: nothing moves it in the
background, so waiting on it (or testing it) drives the transport. Both
answer the same calls (wait with a timeout, test, exception, result,
callbacks, a torch future), which the faces adapt to their own types:
torch_backend/work.py's TorchWork and mpi/request.py's Request.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable

from meshcomm.errors import CommTimeoutError


class Work:
    """Completes when its operation finished; `wait` re-raises the operation's failure."""

    def __init__(self, description: str) -> None:
        self.description = description
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["Work"], None]] = []
        self._lock = threading.Lock()

    def wait(self, timeout: float | datetime.timedelta | None = None) -> bool:
        """Block until done (at most `timeout` seconds, or a timedelta, when given); raise its error if it failed."""
        if isinstance(timeout, datetime.timedelta):  # torch's spelling
            timeout = timeout.total_seconds()
        return self._wait(timeout)

    def _wait(self, timeout: float | None) -> bool:
        raise NotImplementedError

    def is_completed(self) -> bool:
        """True once the operation finished, successfully or not; never blocks."""
        raise NotImplementedError

    def _settled(self) -> bool:
        raise NotImplementedError

    def _finish(self, error: BaseException | None) -> None:
        with self._lock:
            self._error = error
            self._mark_done()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def _mark_done(self) -> None:
        raise NotImplementedError

    def test(self) -> bool:
        """MPI's name for is_completed."""
        return self.is_completed()

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> Any:
        self.wait()
        return self._result

    def add_done_callback(self, callback: Callable[["Work"], None]) -> None:
        """Run `callback(work)` once the work completes (at once when it already has)."""
        with self._lock:
            if not self._settled():
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
        return f"<{type(self).__name__} {self.description} {state}>"


class QueuedWork(Work):
    """A collective run by the group's worker thread, which completes it."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self._event = threading.Event()

    def _settled(self) -> bool:
        return self._event.is_set()

    def _mark_done(self) -> None:
        self._event.set()

    def _wait(self, timeout: float | None) -> bool:
        if not self._event.wait(timeout):
            raise CommTimeoutError(f"{self.description} did not complete within {timeout} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._event.is_set()


class MessageWork(Work):
    """A point-to-point operation: `wait` and `is_completed` move it (there is no background progress).

    `drive(seconds)` blocks until the operation is done or raises; `poll()` moves it without blocking and
    says whether it is done. `finish` runs once, on success, before the work counts as complete; `on_done`
    runs once with the outcome; `source()` names the sender of a receive.
    """

    def __init__(self, description: str, drive: Callable[[float], None], poll: Callable[[], bool],
                 default_timeout: float, finish: Callable[[], Any] | None = None,
                 on_done: Callable[[BaseException | None], None] | None = None,
                 source: Callable[[], int] | None = None) -> None:
        super().__init__(description)
        self._drive = drive
        self._poll = poll
        self._default_timeout = default_timeout
        self._then = finish
        self._on_done = on_done
        self._source = source
        self._done = False
        self._drive_lock = threading.Lock()  # one thread drives; others find it done

    def _settled(self) -> bool:
        return self._done

    def _mark_done(self) -> None:
        self._done = True

    def _complete(self, error: BaseException | None) -> None:
        if self._done:
            return
        if error is None and self._then is not None:
            try:
                self._result = self._then()
            except BaseException as exc:  # reported through the work like any failure
                error = exc
        if self._on_done is not None:
            self._on_done(error)
        self._finish(error)

    def _run(self, seconds: float) -> None:
        """Drive the operation to its end (the caller holds _drive_lock); a timeout leaves it pending."""
        if self._done:
            return
        try:
            self._drive(seconds)
        except CommTimeoutError:
            raise  # not done yet: a later wait may still complete it
        except BaseException as exc:
            self._complete(exc)
            return
        self._complete(None)

    def _wait(self, timeout: float | None) -> bool:
        with self._drive_lock:
            self._run(self._default_timeout if timeout is None else timeout)
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        if not self._done and self._poll() and self._drive_lock.acquire(blocking=False):
            try:
                self._run(0)  # done already: this only records the result (or the failure)
            except CommTimeoutError:
                pass
            finally:
                self._drive_lock.release()
        return self._done

    def source_rank(self) -> int:
        """The sender's rank, for a receive (from any source too)."""
        self.wait()
        if self._source is None:
            raise ValueError("source_rank() is defined for receives only")
        return self._source()

    _source_rank = source_rank  # torch's private spelling, which its own callers use

    def get_future(self):
        if not self._done:
            # Nothing completes a message in the background: a caller holding only the future would wait forever.
            threading.Thread(target=self._wait_quietly, name="meshcomm-message-future", daemon=True).start()
        return super().get_future()

    def _wait_quietly(self) -> None:
        try:
            self.wait()
        except BaseException:  # noqa: BLE001 (the error is in the future already)
            pass

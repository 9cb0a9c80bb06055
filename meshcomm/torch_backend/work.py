"""TorchWork: the torch `_Work` that meshcomm's process group returns, carrying errors to Python and C++ callers."""

from __future__ import annotations

import datetime
import threading
from typing import Any, Callable

import torch
import torch.distributed as dist

from meshcomm.errors import CommTimeoutError

# How much longer than the group's own deadline a wait lasts: the operation
# itself fails at its deadline, and that error is the one worth reporting.
_GRACE_SECONDS = 5.0


def _wait_seconds(timeout: Any, default: float) -> float:
    """torch passes a timedelta (zero or negative: none given) from C++, None or a number from Python."""
    if timeout is None:
        return default
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    return default if timeout <= 0 else float(timeout)


class TorchWork(dist._Work):
    """Completes once all of its meshcomm operations have finished and results are in place.

    torch's own `_create_work_from_future` never raises from wait(), and a
    future completed with set_exception looks like success to C++ callers
    such as DDP's reducer; so this class keeps the error itself, raises it
    from wait(), and hands out a future chained through a callback that
    raises it.
    """

    # Defaults on the class, set on an instance only when needed.
    _error: BaseException | None = None
    _source: int | None = None
    _drive: Callable[[float], None] | None = None  # set for point-to-point work: waiting moves it
    _poll: Callable[[], bool] | None = None  # and this tells, without blocking, whether it is done
    _future: torch.futures.Future | None = None

    def __init__(self, description: str, result: list[torch.Tensor], timeout: float) -> None:
        super().__init__()
        self._description = description
        self._result = result
        self._timeout = timeout
        self._done = False
        self._event = threading.Event()
        self._drive_lock = threading.Lock()
        # C++ reads the reduced tensors from the future's value (DDP), so the
        # base future always carries the tensors; the error travels through
        # the chained callback (made by get_future), which C++ sees as a failed future.
        self._base = torch.futures.Future()

    def _check(self, future: torch.futures.Future) -> list[torch.Tensor]:
        if self._error is not None:
            raise self._error
        return future.value()

    def _settle(self, error: BaseException | None, source: int | None = None) -> None:
        if self._done:
            return
        self._error = error
        self._source = source
        # The futures first: whoever returns from wait() may read get_future().value() at once.
        self._base.set_result(self._result)
        self._done = True
        self._event.set()

    # ----- torch's Work interface

    def wait(self, timeout: Any = None) -> bool:
        seconds = _wait_seconds(timeout, self._timeout + _GRACE_SECONDS)
        if self._drive is not None:
            with self._drive_lock:  # one thread drives; others find it done
                if not self._done:
                    try:
                        self._drive(seconds)
                    except BaseException as exc:  # the peer's failure belongs to this work
                        self._settle(exc)
        if not self._done and not self._event.wait(seconds):
            raise CommTimeoutError(f"{self._description} did not complete within {seconds:g} s")
        if self._error is not None:
            raise self._error
        return True

    def get_future(self) -> torch.futures.Future:
        with self._drive_lock:
            if self._future is None:
                self._future = self._base.then(self._check)
        if self._drive is not None and not self._done:
            # Point-to-point work completes as it is waited on; a caller holding
            # only the future would otherwise wait forever.
            threading.Thread(target=self._wait_quietly, name="meshcomm-p2p-future", daemon=True).start()
        return self._future

    def _wait_quietly(self) -> None:
        try:
            self.wait()
        except BaseException:  # noqa: BLE001 (the error is in the future already)
            pass

    def is_completed(self) -> bool:
        if not self._done and self._poll is not None and self._poll():
            self._wait_quietly()  # done already: this only records the result (or the failure)
        return self._done

    def is_success(self) -> bool:
        return self._done and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._result

    def source_rank(self) -> int:
        """The sender's rank in the group, for a receive from any source."""
        self.wait()
        if self._source is None:
            raise ValueError("source_rank() is defined for receives only")
        return self._source

    def _source_rank(self) -> int:
        return self.source_rank()

    def synchronize(self) -> None:
        """CPU work has no stream to synchronize with."""

    def __repr__(self) -> str:
        state = "failed" if self._error else ("done" if self._done else "pending")
        return f"<TorchWork {self._description} {state}>"


def track(description: str, works: list, result: list[torch.Tensor], timeout: float,
          after: Callable[[], None] | None = None) -> TorchWork:
    """A TorchWork that completes when every meshcomm Work in `works` has, after running `after`.

    `after` (copying results back into the caller's tensors) runs before the
    work counts as complete, so whoever waits or reads the future sees them.
    """
    work = TorchWork(description, result, timeout)
    pending = [w for w in works if w is not None]
    if not pending:
        _finish(work, None, after)
        return work
    lock = threading.Lock()
    state = {"left": len(pending), "error": None}

    def done(one) -> None:
        with lock:
            state["left"] -= 1
            if state["error"] is None and one.exception() is not None:
                state["error"] = one.exception()
            last = state["left"] == 0
        if last:
            _finish(work, state["error"], after)

    for one in pending:
        one.add_done_callback(done)
    return work


def _finish(work: TorchWork, error: BaseException | None, after: Callable[[], None] | None) -> None:
    if error is None and after is not None:
        try:
            after()
        except BaseException as exc:  # reported through the work like any failure
            error = exc
    work._settle(error)


def point_to_point(description: str, p2p_work, tensor: torch.Tensor, timeout: float,
                   group_rank_of: Callable[[int], int] | None = None) -> TorchWork:
    """Wrap meshcomm's MessageWork, which completes as it is waited on.

    For a receive, `group_rank_of` turns the sender's global rank (what the
    transport records) into its rank in the group (what torch asks for).
    """
    work = TorchWork(description, [tensor], timeout)

    def drive(seconds: float) -> None:
        p2p_work.wait(seconds)
        source = None if group_rank_of is None else group_rank_of(p2p_work.source_rank())
        work._settle(None, source)

    work._drive = drive
    work._poll = p2p_work.is_completed
    return work

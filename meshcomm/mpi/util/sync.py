"""mpi4py.util.sync on meshcomm: Sequential, Counter, Mutex, Condition and Semaphore across the ranks of a communicator.

Their shared state lives in one-sided windows (MPI.Win), which a rank's
target thread serves while its program is busy, so no rank has to be
listening:

- Counter: one number on the root rank, moved by atomic Fetch_and_op.
- Mutex: an MCS queue lock. The root holds the queue's tail; each rank holds
  the rank queued after it. Acquiring swaps oneself in as the tail and, when
  someone was before, waits for that rank's zero-byte message; releasing
  either swaps the tail back to empty (nobody waiting) or hands over by
  message to the rank queued next. Waiters block in a receive, not a spin.
- Condition: a ring of waiting ranks on the root, touched only under the
  condition's mutex; notify pops waiters and sends each a message.
- Semaphore: a Counter changed by compare-and-swap, only within its bounds.
- Sequential: each rank waits for the one before it, by message.

The messages travel on a duplicate of the communicator, so they never meet
the program's own. Every wait is bounded by the communicator's timeout.
"""

from __future__ import annotations

import time

import numpy as np

from meshcomm import config
from meshcomm.errors import CommTimeoutError
from meshcomm.mpi import constants as C
from meshcomm.mpi import ops
from meshcomm.mpi.comm import Comm
from meshcomm.mpi.window import LOCK_EXCLUSIVE, LOCK_SHARED, Win

__all__ = ["Condition", "Counter", "Mutex", "Semaphore", "Sequential"]

_NOBODY = -1
_PAUSE = 0.001  # seconds between looks while waiting on a window's value


def _self_comm() -> Comm:
    from meshcomm.mpi import COMM_SELF

    return COMM_SELF


def _deadline() -> float:
    return time.monotonic() + config.get_float("MESHCOMM_TIMEOUT")


class _Cells:
    """`count` numbers of one dtype on each rank of a window, read and changed atomically."""

    def __init__(self, comm: Comm, count: int, dtype, initial) -> None:
        self.dtype = np.dtype(dtype)
        self.win = Win.Allocate(count * self.dtype.itemsize, self.dtype.itemsize, comm=comm)
        np.asarray(self.win.tomemory()).view(self.dtype)[:] = initial
        comm.Barrier()  # everyone's cells hold their first values before anyone touches them

    def fetch_and_op(self, rank: int, cell: int, value, op=ops.SUM):
        origin, result = np.array([value], dtype=self.dtype), np.zeros(1, dtype=self.dtype)
        self.win.Lock(rank, LOCK_SHARED)
        try:
            self.win.Fetch_and_op(origin, result, rank, cell, op)
        finally:
            self.win.Unlock(rank)
        return result[0].item()

    def compare_and_swap(self, rank: int, cell: int, expected, value):
        origin, compare = np.array([value], dtype=self.dtype), np.array([expected], dtype=self.dtype)
        result = np.zeros(1, dtype=self.dtype)
        self.win.Lock(rank, LOCK_SHARED)
        try:
            self.win.Compare_and_swap(origin, compare, result, rank, cell)
        finally:
            self.win.Unlock(rank)
        return result[0].item()

    def read(self, rank: int, count: int) -> np.ndarray:
        values = np.zeros(count, dtype=self.dtype)
        self.win.Lock(rank, LOCK_EXCLUSIVE)
        try:
            self.win.Get(values, rank)
        finally:
            self.win.Unlock(rank)
        return values

    def write(self, rank: int, values: np.ndarray) -> None:
        self.win.Lock(rank, LOCK_EXCLUSIVE)
        try:
            self.win.Put(np.ascontiguousarray(values, dtype=self.dtype), rank)
        finally:
            self.win.Unlock(rank)

    def free(self) -> None:
        self.win.Free()


class Sequential:
    """Run a block one rank at a time, in rank order: `with Sequential(comm): ...`."""

    def __init__(self, comm: Comm, tag: int = 0) -> None:
        self.comm, self.tag = comm, tag

    def begin(self) -> None:
        rank = self.comm.Get_rank()
        if rank > 0:
            self.comm.Recv(None, rank - 1, self.tag)

    def end(self) -> None:
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        if rank < size - 1:
            self.comm.Send(None, rank + 1, self.tag)

    def __enter__(self) -> "Sequential":
        self.begin()
        return self

    def __exit__(self, *exc) -> None:
        self.end()


class Counter:
    """A shared counter on rank `root`: next() returns its value and adds `step` to it, atomically."""

    def __init__(self, start=0, step=1, *, typecode: str = "i", comm: Comm | None = None, info=None,
                 root: int = 0) -> None:
        comm = comm if comm is not None else _self_comm()
        if not 0 <= root < comm.Get_size():
            raise ValueError(f"root must be a rank in [0, {comm.Get_size()}), got {root}")
        self._step, self._root = step, root
        self._cells: _Cells | None = _Cells(comm, 1 if comm.Get_rank() == root else 0, np.dtype(typecode),
                                            start if comm.Get_rank() == root else [])

    def _live(self) -> _Cells:
        if self._cells is None:
            raise RuntimeError("the counter has been freed")
        return self._cells

    def next(self, incr=None):
        """The counter's value, after which it grows by `incr` (default: the step)."""
        return self._live().fetch_and_op(self._root, 0, self._step if incr is None else incr)

    def _add_if(self, incr, allowed) -> bool:
        """Add `incr` if `allowed(value)`, atomically (compare and swap, again while others change it): whether it
        did. A refused change is never made, so nobody sees the value leave its bounds even briefly."""
        cells = self._live()
        current = self.next(0)
        while allowed(current):
            seen = cells.compare_and_swap(self._root, 0, current, current + incr)
            if seen == current:
                return True
            current = seen
        return False

    def __iter__(self) -> "Counter":
        return self

    def __next__(self):
        return self.next()

    def free(self) -> None:
        """Collective; freeing again does nothing."""
        if self._cells is not None:
            self._cells.free()
            self._cells = None


class Mutex:
    """A lock across ranks (recursive when asked): acquire, release, `with mutex:`."""

    _TAIL, _NEXT = 0, 1  # cells: the queue's tail (used on rank 0), the rank queued after this one

    def __init__(self, recursive: bool = False, *, comm: Comm | None = None, info=None) -> None:
        comm = comm if comm is not None else _self_comm()
        self._recursive = bool(recursive)
        self._comm = comm
        self._rank = comm.Get_rank()
        self._count = 0  # how many times this rank holds it (0 or 1 unless recursive)
        self._cells: _Cells | None = _Cells(comm, 2, np.int64, _NOBODY)
        self._messages: Comm | None = comm.Dup()

    def _live(self) -> _Cells:
        if self._cells is None:
            raise RuntimeError("the mutex has been freed")
        return self._cells

    def acquire(self, blocking: bool = True) -> bool:
        cells = self._live()
        if self._count:
            if not self._recursive:
                raise RuntimeError("this rank already holds the (non-recursive) mutex")
            self._count += 1
            return True
        # Nobody can be naming this rank as predecessor while it is out of the queue: clear what the last did.
        cells.fetch_and_op(self._rank, self._NEXT, _NOBODY, ops.REPLACE)
        if not blocking:
            if cells.compare_and_swap(0, self._TAIL, _NOBODY, self._rank) != _NOBODY:
                return False
        else:
            before = cells.fetch_and_op(0, self._TAIL, self._rank, ops.REPLACE)
            if before != _NOBODY:
                cells.fetch_and_op(before, self._NEXT, self._rank, ops.REPLACE)  # queue behind it
                self._messages.Recv(None, before, 0)  # its release hands over
        self._count = 1
        return True

    def release(self) -> None:
        cells = self._live()
        if not self._count:
            raise RuntimeError("release of a mutex this rank does not hold")
        self._count -= 1
        if self._count:
            return
        if cells.compare_and_swap(0, self._TAIL, self._rank, _NOBODY) == self._rank:
            return  # nobody queued behind
        deadline = _deadline()
        while (successor := cells.fetch_and_op(self._rank, self._NEXT, 0)) == _NOBODY:
            if time.monotonic() > deadline:
                raise CommTimeoutError("mutex release: the rank queued next never told who it is")
            time.sleep(_PAUSE)  # it has swapped itself in as tail and is about to say so
        self._messages.Send(None, successor, 0)

    def locked(self) -> bool:
        """Whether this rank holds the mutex."""
        self._live()
        return self._count > 0

    def count(self) -> int:
        """How many times this rank holds the mutex (recursive acquisitions included)."""
        self._live()
        return self._count

    def _release_all(self) -> int:
        held, self._count = self._count, 1
        self.release()
        return held

    def _acquire_again(self, held: int) -> None:
        self.acquire()
        self._count = held

    def __enter__(self) -> "Mutex":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def free(self) -> None:
        """Collective: releases the mutex if this rank holds it; freeing again does nothing."""
        if self._cells is None:
            return
        if self._count:
            self._release_all()
        self._cells.free()
        self._messages.Free()
        self._cells = self._messages = None


class Condition:
    """A condition variable across ranks, over a Mutex (a recursive one of its own when none is given)."""

    _HEAD, _TAIL = 0, 1  # cells on rank 0: counters of the ring of waiting ranks that follows

    def __init__(self, mutex: Mutex | None = None, recursive: bool = True, *, comm: Comm | None = None,
                 info=None) -> None:
        self._owns_mutex = mutex is None
        self._mutex = Mutex(recursive, comm=comm) if mutex is None else mutex
        comm = self._mutex._comm
        self._size = comm.Get_size()
        self._queue: _Cells | None = _Cells(comm, 2 + self._size if comm.Get_rank() == 0 else 0, np.int64, 0)
        self._messages: Comm | None = comm.Dup()

    def _live(self) -> _Cells:
        if self._queue is None:
            raise RuntimeError("the condition has been freed")
        return self._queue

    def _held(self) -> _Cells:
        queue = self._live()
        if not self._mutex.locked():
            raise RuntimeError("the condition's mutex must be held")
        return queue

    def acquire(self, blocking: bool = True) -> bool:
        self._live()
        return self._mutex.acquire(blocking)

    def release(self) -> None:
        self._live()
        self._mutex.release()

    def __enter__(self) -> "Condition":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def wait(self) -> bool:
        """Release the mutex, wait for a notify, take the mutex again."""
        queue = self._held()
        ring = queue.read(0, 2 + self._size)
        ring[2 + ring[self._TAIL] % self._size] = self._mutex._rank
        ring[self._TAIL] += 1
        queue.write(0, ring)
        held = self._mutex._release_all()
        self._messages.Recv(None, C.ANY_SOURCE, 0)
        self._mutex._acquire_again(held)
        return True

    def wait_for(self, predicate):
        """Wait until predicate() is true; returns its last value."""
        self._held()
        result = predicate()
        while not result:
            self.wait()
            result = predicate()
        return result

    def notify(self, n: int = 1) -> int:
        """Wake up to `n` waiting ranks; returns how many were waiting and woken."""
        queue = self._held()
        ring = queue.read(0, 2 + self._size)
        woken = []
        while len(woken) < n and ring[self._HEAD] < ring[self._TAIL]:
            woken.append(int(ring[2 + ring[self._HEAD] % self._size]))
            ring[self._HEAD] += 1
        if woken:
            queue.write(0, ring)
        for rank in woken:
            self._messages.Send(None, rank, 0)
        return len(woken)

    def notify_all(self) -> int:
        return self.notify(self._size)

    def free(self) -> None:
        """Collective: releases the mutex if held; frees the mutex too when the condition made it."""
        if self._queue is None:
            return
        if self._mutex._cells is not None and self._mutex.locked():
            self._mutex._release_all()
        self._queue.free()
        self._messages.Free()
        self._queue = self._messages = None
        if self._owns_mutex:
            self._mutex.free()


class Semaphore:
    """A counting semaphore across ranks; `bounded` refuses releases above the starting value."""

    def __init__(self, value: int = 1, bounded: bool = True, *, comm: Comm | None = None, info=None) -> None:
        if value < 0:
            raise ValueError(f"semaphore's initial value must be >= 0, got {value}")
        self._value, self._bounded = value, bounded
        self._counter = Counter(value, typecode="q", comm=comm)

    def acquire(self, blocking: bool = True) -> bool:
        deadline = _deadline()
        while True:
            if self._counter._add_if(-1, lambda current: current > 0):
                return True
            if not blocking:
                return False
            if time.monotonic() > deadline:
                raise CommTimeoutError("semaphore acquire: nothing was released within the timeout")
            time.sleep(_PAUSE)

    def release(self, n: int = 1) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not self._counter._add_if(n, lambda current: not self._bounded or current + n <= self._value):
            raise ValueError(f"semaphore released too many times (would exceed its value {self._value})")

    def __enter__(self) -> "Semaphore":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def free(self) -> None:
        self._counter.free()

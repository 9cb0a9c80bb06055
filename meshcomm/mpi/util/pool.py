"""mpi4py.util.pool: multiprocessing.pool's interface on concurrent.futures executors.

`Pool` runs tasks in worker processes spawned as MPI processes
(meshcomm.mpi.futures.MPIPoolExecutor), as mpi4py's are; `ThreadPool` runs
them on threads. Both executors also take `unordered=True` in `map` and
have `starmap`, which the pool's `imap_unordered` and `istarmap` use.
"""

from __future__ import annotations

import concurrent.futures as cf
import operator
import os
import threading
import warnings

from meshcomm.mpi.futures import MPIPoolExecutor
from meshcomm.mpi.futures.maps import ChunkedMaps

__all__ = ["Pool", "ThreadPool", "AsyncResult", "ApplyResult", "MapResult"]


class ProcessPoolExecutor(MPIPoolExecutor):
    """Worker processes spawned as a job of their own (MPI's Spawn), as mpi4py's pool's are."""


class ThreadPoolExecutor(ChunkedMaps, cf.ThreadPoolExecutor):
    pass


class Pool:
    """A pool of worker processes with multiprocessing.Pool's calls."""

    Executor = ProcessPoolExecutor

    def __init__(self, processes=None, initializer=None, initargs=(), **kwargs) -> None:
        if processes is not None and processes < 1:
            raise ValueError(f"number of processes must be at least 1, got {processes}")
        if initializer is not None and not callable(initializer):
            raise TypeError(f"initializer must be a callable, got {type(initializer).__name__}")
        for name in ("maxtasksperchild", "context"):
            if kwargs.pop(name, None) is not None:
                warnings.warn(f"argument {name!r} is not supported", stacklevel=2)
        self.executor = self.Executor(processes, initializer=initializer, initargs=initargs, **kwargs)
        self._collector: cf.ThreadPoolExecutor | None = None  # runs the *_async calls' result gathering
        self._collector_lock = threading.Lock()

    def apply(self, func, args=(), kwds=None):
        return self.executor.submit(func, *args, **(kwds or {})).result()

    def apply_async(self, func, args=(), kwds=None, callback=None, error_callback=None) -> "ApplyResult":
        return ApplyResult(self.executor.submit(func, *args, **(kwds or {})), callback, error_callback)

    def map(self, func, iterable, chunksize=None) -> list:
        iterable, chunksize = self._chunked(iterable, chunksize)
        return list(self.imap(func, iterable, chunksize))

    def map_async(self, func, iterable, chunksize=None, callback=None, error_callback=None) -> "MapResult":
        iterable, chunksize = self._chunked(iterable, chunksize)
        return MapResult(self._collect(self.imap(func, iterable, chunksize)), callback, error_callback)

    def imap(self, func, iterable, chunksize=1):
        return self.executor.map(func, iterable, chunksize=chunksize)

    def imap_unordered(self, func, iterable, chunksize=1):
        return self.executor.map(func, iterable, chunksize=chunksize, unordered=True)

    def starmap(self, func, iterable, chunksize=None) -> list:
        iterable, chunksize = self._chunked(iterable, chunksize)
        return list(self.istarmap(func, iterable, chunksize))

    def starmap_async(self, func, iterable, chunksize=None, callback=None, error_callback=None) -> "MapResult":
        iterable, chunksize = self._chunked(iterable, chunksize)
        return MapResult(self._collect(self.istarmap(func, iterable, chunksize)), callback, error_callback)

    def istarmap(self, func, iterable, chunksize=1):
        return self.executor.starmap(func, iterable, chunksize=chunksize)

    def istarmap_unordered(self, func, iterable, chunksize=1):
        return self.executor.starmap(func, iterable, chunksize=chunksize, unordered=True)

    def close(self) -> None:
        """Take no more tasks; those submitted still run."""
        self.executor.shutdown(wait=False)

    def terminate(self) -> None:
        """Take no more tasks and drop those not yet started."""
        self.executor.shutdown(wait=False, cancel_futures=True)

    def join(self) -> None:
        """Wait for the workers to finish and exit."""
        self.executor.shutdown(wait=True)
        with self._collector_lock:
            collector, self._collector = self._collector, None
        if collector is not None:
            collector.shutdown(wait=True)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _chunked(self, iterable, chunksize):
        """multiprocessing's default chunk size: about four chunks per worker."""
        if chunksize is not None:
            return iterable, chunksize
        workers = getattr(self.executor, "_max_workers", 0)
        tasks = operator.length_hint(iterable)
        if tasks == 0:
            iterable = list(iterable)
            tasks = len(iterable)
        if workers <= 0 or tasks == 0:
            return iterable, 1
        return iterable, -(-tasks // (4 * workers))

    def _collect(self, results) -> cf.Future:
        with self._collector_lock:
            if self._collector is None:
                self._collector = cf.ThreadPoolExecutor(min(4, os.cpu_count() or 1))
            return self._collector.submit(list, results)


class ThreadPool(Pool):
    """A pool of worker threads with multiprocessing.Pool's calls."""

    Executor = ThreadPoolExecutor


class AsyncResult:
    """The result of an *_async call; a cancelled task (the pool was terminated) reads as a timeout."""

    def __init__(self, future: cf.Future, callback=None, error_callback=None) -> None:
        self.future = future
        self._event = threading.Event()
        future.add_done_callback(lambda done: self._finished(done, callback, error_callback))

    def _finished(self, future: cf.Future, callback, error_callback) -> None:
        try:
            try:
                exception = future.exception()
            except cf.CancelledError:
                exception = TimeoutError()
            if exception is not None:
                if error_callback is not None:
                    error_callback(exception)
            elif callback is not None:
                callback(future.result())
        finally:
            self._event.set()

    def get(self, timeout=None):
        """The result, or the exception the call raised; TimeoutError when not ready within `timeout`."""
        self.wait(timeout)
        if not self.ready():
            raise TimeoutError(f"the result was not ready within {timeout} s")
        try:
            return self.future.result()
        except cf.CancelledError:
            raise TimeoutError("the task was cancelled before it ran (the pool was terminated)") from None

    def wait(self, timeout=None) -> None:
        self._event.wait(timeout)

    def ready(self) -> bool:
        return self._event.is_set()

    def successful(self) -> bool:
        if not self.ready():
            raise ValueError(f"{self!r} is not ready")
        try:
            return self.future.exception() is None
        except cf.CancelledError:
            return False


class ApplyResult(AsyncResult):
    """What apply_async returns."""


class MapResult(AsyncResult):
    """What map_async and starmap_async return."""

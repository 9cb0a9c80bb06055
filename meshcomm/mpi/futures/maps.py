"""`map` and `starmap` for executors: items sent in chunks, one task per chunk, results in order or as they finish
(`unordered=True`), as mpi4py.futures has them."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import time


def _starmap_chunk(fn, chunk):
    return [fn(*args) for args in chunk]


def _chunks(iterable, size: int):
    iterator = iter(iterable)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _results(futures, deadline: float | None, unordered: bool):
    """Yield each chunk's results, in order or as they finish; an abandoned iteration cancels what is left."""
    def left():
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    try:
        finished = cf.as_completed(futures, timeout=left()) if unordered else futures
        for future in finished:
            yield from future.result(timeout=left())
    finally:
        for future in futures:
            future.cancel()


class ChunkedMaps:
    """`map` and `starmap` that send chunks of items as single tasks and may yield results as they finish."""

    def map(self, fn, *iterables, timeout=None, chunksize=1, unordered=False):
        return self.starmap(fn, zip(*iterables), timeout=timeout, chunksize=chunksize, unordered=unordered)

    def starmap(self, fn, iterable, timeout=None, chunksize=1, unordered=False):
        if isinstance(chunksize, bool) or not isinstance(chunksize, int) or chunksize < 1:
            raise ValueError(f"chunksize must be an int >= 1, got {chunksize!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        futures = [self.submit(_starmap_chunk, fn, chunk) for chunk in _chunks(iterable, chunksize)]
        return _results(futures, deadline, unordered)

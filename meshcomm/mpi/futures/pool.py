"""MPIPoolExecutor: tasks go to spawned MPI workers, one at a time each, from one manager thread.

The manager spawns the workers (MPI.COMM_SELF.Spawn of worker.py) at the
first task or at bootup(), sends each the parent's main script and the
initializer, then hands a queued task to every idle worker and looks for
each busy worker's result. Shutdown tells the workers to stop and
disconnects; a worker that dies breaks the executor (BrokenExecutor), and
the others are told to stop. A task and its result are pickled, as in mpi4py.futures.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import pickle
import queue
import sys
import threading
import time

from meshcomm.mpi.futures.maps import ChunkedMaps

SETUP, TASK = 1, 2
_IDLE_LOOK_SECONDS = 0.001  # the manager's look at its queue and its workers' results, when both are quiet
_STOP = object()
_bootstrapping = threading.local()  # set while a worker imports its parent's main script


@contextlib.contextmanager
def bootstrapping():
    _bootstrapping.on = True
    try:
        yield
    finally:
        _bootstrapping.on = False


class MPIPoolExecutor(ChunkedMaps, cf.Executor):
    """concurrent.futures.Executor on `max_workers` spawned MPI processes (default: this host's cores)."""

    def __init__(self, max_workers=None, initializer=None, initargs=(), **kwargs) -> None:
        if getattr(_bootstrapping, "on", False):
            raise RuntimeError("a worker imported its parent's main script, and the script makes a pool when "
                               "imported: make it only under `if __name__ == '__main__':`, as multiprocessing asks")
        if max_workers is None:
            max_workers = os.cpu_count() or 1
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be an int >= 1, got {max_workers!r}")
        if initializer is not None and not callable(initializer):
            raise TypeError(f"initializer must be callable, got {type(initializer).__name__}")
        self.num_workers = max_workers
        self._setup = (initializer, tuple(initargs))
        self._python = [sys.executable, *kwargs.pop("python_args", [])]
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._manager: threading.Thread | None = None

    def bootup(self, wait: bool = True) -> "MPIPoolExecutor":
        """Start the workers now rather than at the first task."""
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot start the workers of an executor that was shut down")
            self._start()
        return self

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit a task after shutdown")
            future: cf.Future = cf.Future()
            self._tasks.put((future, fn, args, kwargs))
            self._start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                if cancel_futures:
                    _cancel_queued(self._tasks)
                self._tasks.put(_STOP)
            manager = self._manager
        if wait and manager is not None:
            manager.join()

    def _start(self) -> None:
        if self._manager is None:
            self._manager = threading.Thread(target=self._manage, name="meshcomm-futures-manager", daemon=True)
            self._manager.start()

    def _manage(self) -> None:
        from meshcomm.mpi import COMM_SELF

        try:
            workers = COMM_SELF.Spawn(self._python[0], [*self._python[1:], "-m", "meshcomm.mpi.futures.worker"],
                                      self.num_workers)
        except BaseException as exc:
            _fail_all(self._tasks, exc)
            return
        running: dict = {}  # worker -> (its task's future, the receive of its outcome)
        try:
            self._serve(workers, running)
        except BaseException as exc:  # a worker died or the connection broke: no task can finish any more
            broken = cf.BrokenExecutor(f"the MPI pool's workers can no longer run tasks: {exc}")
            for future, _ in running.values():
                future.set_exception(broken)
            _let_go(workers)
            _fail_all(self._tasks, broken)

    def _serve(self, workers, running: dict) -> None:
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        for rank in range(self.num_workers):
            workers.send(main, dest=rank, tag=SETUP)
            workers.send(pickle.dumps(self._setup), dest=rank, tag=SETUP)
        idle = list(range(self.num_workers))
        stopping = False
        while not (stopping and not running):
            quiet = True
            for worker, (future, result) in list(running.items()):
                done, answer = result.test()  # a worker that died fails its own receive here
                if done:
                    del running[worker]
                    idle.append(worker)
                    ok, value = pickle.loads(answer)
                    (future.set_result if ok else future.set_exception)(value)
                    quiet = False
            while idle and not stopping:
                try:
                    task = self._tasks.get(block=not running, timeout=None if running else 0.05)
                except queue.Empty:
                    break
                if task is _STOP:
                    stopping = True
                    break
                future, fn, args, kwargs = task
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    payload = pickle.dumps((fn, args, kwargs))
                except Exception as exc:  # the task cannot leave this process: it fails alone
                    future.set_exception(exc)
                    continue
                worker = idle.pop()
                workers.send(payload, dest=worker, tag=TASK)
                running[worker] = (future, workers.irecv(source=worker, tag=TASK))
                quiet = False
            if quiet:
                time.sleep(_IDLE_LOOK_SECONDS)
        _let_go(workers)


def _let_go(workers) -> None:
    """Tell every worker still there to stop, and close the connection to them."""
    for rank in range(workers.Get_remote_size()):
        try:
            workers.send(None, dest=rank, tag=TASK)
        except Exception:  # that worker is gone
            pass
    workers.Free()


def outcome_of(ok: bool, value) -> bytes:
    """A task's outcome, pickled by the worker; an outcome that cannot be pickled becomes an error saying so."""
    try:
        return pickle.dumps((ok, value))
    except Exception as exc:
        return pickle.dumps((False, RuntimeError(f"the task's {'result' if ok else 'exception'} could not be "
                                                 f"pickled: {exc!r}")))


def _cancel_queued(tasks: queue.SimpleQueue) -> None:
    while True:
        try:
            task = tasks.get_nowait()
        except queue.Empty:
            return
        if task is not _STOP:
            task[0].cancel()


def _fail_all(tasks: queue.SimpleQueue, error: BaseException) -> None:
    """The workers could not be started: every task, queued now or later, fails with that error."""
    while True:
        task = tasks.get()
        if task is _STOP:
            return
        if task[0].set_running_or_notify_cancel():
            task[0].set_exception(error)

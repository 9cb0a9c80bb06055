"""A spawned worker of MPIPoolExecutor (`python -m meshcomm.mpi.futures.worker`): run tasks until told to stop.

Importing the MPI face connects this process to its parent (spawn.py). The
first message names the parent's main script, which is imported here as
multiprocessing does (`__mp_main__`), so functions defined there unpickle.
Tasks come pickled, and are unpickled here, so a task that cannot be read
fails alone instead of the worker.
"""

from __future__ import annotations

import multiprocessing.spawn
import pickle

from meshcomm.mpi import comm
from meshcomm.mpi.futures import pool
from meshcomm.mpi.futures.pool import SETUP, TASK, outcome_of


def serve() -> None:
    parent = comm.Comm.Get_parent()
    main_path = parent.recv(source=0, tag=SETUP)
    setup = parent.recv(source=0, tag=SETUP)
    failed = None  # what every task then reports, as concurrent.futures' BrokenExecutor does
    try:
        if main_path:
            with pool.bootstrapping():
                multiprocessing.spawn.import_main_path(main_path)
    except BaseException as exc:
        failed = RuntimeError(f"the worker could not import the main script {main_path}: {exc!r}")
    if failed is None:
        try:
            initializer, initargs = pickle.loads(setup)
            if initializer is not None:
                initializer(*initargs)
        except BaseException as exc:
            failed = RuntimeError(f"the worker's initializer failed: {exc!r}")
    while (payload := parent.recv(source=0, tag=TASK)) is not None:
        if failed is not None:
            outcome = (False, failed)
        else:
            try:
                fn, args, kwargs = pickle.loads(payload)
                outcome = (True, fn(*args, **kwargs))
            except BaseException as exc:
                outcome = (False, exc)
        parent.send(outcome_of(*outcome), dest=0, tag=TASK)
    parent.Disconnect()


if __name__ == "__main__":
    serve()

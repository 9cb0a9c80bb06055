"""Run by test_futures.py under `meshcomm run -n N`: MPIPoolExecutor and the process Pool on spawned workers.

Every rank runs its own pool; each expected value is computed here in-process.
"""

import concurrent.futures as cf
import os

from meshcomm import MPI
from meshcomm.mpi.futures import MPIPoolExecutor
from meshcomm.mpi.util.pool import Pool

SEEN = []


def remember(value):
    SEEN.append(value)


def cube_plus_seen(x):
    return x ** 3 + sum(SEEN)


def where(_):
    return MPI.COMM_WORLD.Get_size(), os.getppid()


def fail(x):
    raise ValueError(f"task {x} fails")


def die(_):
    os._exit(9)


def main() -> None:
    rank = MPI.COMM_WORLD.Get_rank()
    with MPIPoolExecutor(2, initializer=remember, initargs=(rank,)) as pool:
        assert list(pool.map(cube_plus_seen, range(20))) == [x ** 3 + rank for x in range(20)]
        # The workers are a job of their own, spawned by this process (their parent).
        assert set(pool.map(where, range(4))) <= {(2, os.getpid())}
        error = pool.submit(fail, 7).exception(timeout=60)
        assert isinstance(error, ValueError) and str(error) == "task 7 fails", error
        assert sorted(pool.map(cube_plus_seen, range(10), chunksize=3, unordered=True)) == \
            [x ** 3 + rank for x in range(10)]

    pool = MPIPoolExecutor(1)
    doomed = pool.submit(die, 0)
    later = pool.submit(cube_plus_seen, 2)
    for future in (doomed, later):
        assert isinstance(future.exception(timeout=60), cf.BrokenExecutor), future.exception()
    pool.shutdown()

    with Pool(2) as processes:
        assert processes.map(cube_plus_seen, range(8), chunksize=2) == [x ** 3 for x in range(8)]
        processes.close()
        processes.join()

    print(f"OK rank {rank} of {MPI.COMM_WORLD.Get_size()}", flush=True)


if __name__ == "__main__":  # workers import this script to unpickle its functions
    main()

"""meshcomm.mpi.util.pool (mpi4py.util.pool): the process pool, which mpi4py's own tests skip here.

mpi4py's test_util_pool runs the thread pool (it is among the suite's core
files); its process-pool tests need MPI spawning, so they are skipped. These
run the same calls on worker processes.
"""

from __future__ import annotations

import operator
import os
import time

import pytest


def _square(x: int) -> int:
    return x * x


def _pid(_: int) -> int:
    return os.getpid()


def _fail() -> None:
    raise KeyError("from a worker")


@pytest.mark.timeout(120)
def test_the_process_pool_maps_in_order_and_unordered_on_other_processes() -> None:
    from meshcomm.mpi.util.pool import Pool

    with Pool(2) as pool:
        assert pool.map(_square, range(20)) == [x * x for x in range(20)]
        assert pool.map(_square, range(20), chunksize=7) == [x * x for x in range(20)]
        assert sorted(pool.imap_unordered(_square, range(10))) == sorted(x * x for x in range(10))
        assert pool.starmap(operator.mul, [(1, 2), (3, 4)]) == [2, 12]
        assert pool.apply(_square, (9,)) == 81
        assert os.getpid() not in set(pool.map(_pid, range(4)))
    pool.join()


@pytest.mark.timeout(120)
def test_a_workers_exception_reaches_get_and_the_error_callback() -> None:
    from meshcomm.mpi.util.pool import Pool

    seen = []
    pool = Pool(1)
    result = pool.apply_async(_fail, error_callback=seen.append)
    pool.close()
    pool.join()
    with pytest.raises(KeyError, match="from a worker"):
        result.get(timeout=60)
    assert not result.successful() and isinstance(seen[0], KeyError)


@pytest.mark.timeout(120)
def test_terminate_drops_tasks_not_started_and_their_results_read_as_timeouts() -> None:
    from meshcomm.mpi.util.pool import ThreadPool

    pool = ThreadPool(1)
    pending = [pool.apply_async(time.sleep, (0.05,)) for _ in range(50)]
    pool.terminate()
    pool.join()
    last = pending[-1]
    last.wait(60)
    assert last.ready() and not last.successful()
    with pytest.raises(TimeoutError):
        last.get(timeout=1)


def test_bad_arguments_are_refused_before_any_worker_starts() -> None:
    from meshcomm.mpi.util.pool import ThreadPool

    with pytest.raises(ValueError, match="at least 1"):
        ThreadPool(0)
    with pytest.raises(TypeError, match="initializer must be a callable"):
        ThreadPool(1, initializer=123)
    with ThreadPool(1) as pool, pytest.raises(ValueError, match="chunksize"):
        pool.imap(_square, range(3), chunksize=0)
    pool.join()

"""mpi4py.util.sync on meshcomm: its objects across ranks, and their misuse refused in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mpi.programs import run_program

REPO = Path(__file__).resolve().parents[2]


def test_misused_sync_objects_say_what_was_wrong() -> None:
    from meshcomm.mpi.util import sync

    mutex = sync.Mutex()
    with pytest.raises(RuntimeError, match="does not hold"):
        mutex.release()
    with mutex:
        with pytest.raises(RuntimeError, match="already holds"):
            mutex.acquire()
    mutex.free()
    with pytest.raises(RuntimeError, match="freed"):
        mutex.acquire()
    semaphore = sync.Semaphore(2)
    assert semaphore.acquire() and semaphore.acquire() and not semaphore.acquire(blocking=False)
    semaphore.release(2)
    with pytest.raises(ValueError, match="too many"):
        semaphore.release()
    assert semaphore._counter.next(0) == 2  # the refused release left the count alone
    semaphore.free()
    with pytest.raises(ValueError, match=">= 0"):
        sync.Semaphore(-1)
    condition = sync.Condition()
    with pytest.raises(RuntimeError, match="must be held"):
        condition.notify()
    condition.free()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_counter_mutex_and_condition_hold_across_ranks(nranks: int) -> None:
    run_program("sync_program.py", nranks)

"""Run by test_sync.py under `meshcomm run -n N`: mpi4py.util.sync's counter, mutex and condition across ranks."""

import numpy as np

from meshcomm import MPI
from meshcomm.mpi.util import sync

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Every value of a shared counter is handed out exactly once.
counter = sync.Counter(start=5, step=3, comm=comm, root=size - 1)
mine = [counter.next() for _ in range(4)]
everyone = sorted(sum(comm.allgather(mine), []))
assert everyone == list(range(5, 5 + 3 * 4 * size, 3)), everyone
counter.free()

# Under the mutex, a read-modify-write of rank 0's window memory by every rank loses no update.
mutex = sync.Mutex(comm=comm)
shared = MPI.Win.Allocate(8 if rank == 0 else 0, 8, comm=comm)
comm.Barrier()
for _ in range(3):
    with mutex:
        value = np.zeros(1, dtype=np.int64)
        shared.Lock(0, MPI.LOCK_SHARED)
        shared.Get(value, 0)
        shared.Unlock(0)
        shared.Lock(0, MPI.LOCK_SHARED)
        shared.Put(value + 1, 0)
        shared.Unlock(0)
comm.Barrier()
if rank == 0:
    assert np.asarray(shared.tomemory()).view(np.int64)[0] == 3 * size
shared.Free()
mutex.free()

# A condition wakes exactly the ranks waiting on it.
condition = sync.Condition(comm=comm)
if rank == 0:
    woken = 0
    while woken < size - 1:
        with condition:
            woken += condition.notify()
    with condition:
        assert condition.notify_all() == 0
else:
    with condition:
        condition.wait()
condition.free()

# A semaphore's refused changes never show: while rank 0 is refused a release above the bound, and then an acquire
# below zero, the others read the count, and it is where it was every time.
semaphore = sync.Semaphore(2, comm=comm)


def refuse_release() -> None:
    try:
        semaphore.release()
    except ValueError:
        return
    raise AssertionError("a release above the semaphore's value was allowed")


def refuse_acquire() -> None:
    assert semaphore.acquire(blocking=False) is False, "an acquire of a taken semaphore was allowed"


for refuse, count in ((refuse_release, 2), (refuse_acquire, 0)):
    if count == 0 and rank == 0:
        semaphore.acquire()
        semaphore.acquire()
    comm.Barrier()
    if rank == 0:
        for _ in range(300):
            refuse()
    else:
        seen = {semaphore._counter.next(0) for _ in range(300)}
        assert seen == {count}, seen
    comm.Barrier()
semaphore.free()

comm.Barrier()
print(f"OK rank {rank} of {size}", flush=True)

"""Run by test_window.py under `meshcomm run -n N`: one-sided communication between ranks, checked with numpy."""

import time

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Fence epochs: every rank writes its rank into slot `rank` of every window, then reads every window back.
memory = np.full(size, -1, dtype=np.int64)
win = MPI.Win.Create(memory, memory.itemsize, MPI.INFO_NULL, comm)
win.Fence()
for target in range(size):
    win.Put(np.array([rank], dtype=np.int64), target, rank)
win.Fence()
assert list(memory) == list(range(size)), memory
seen = np.zeros((size, size), dtype=np.int64)
for target in range(size):
    win.Get(seen[target], target)
win.Fence(MPI.MODE_NOSUCCEED)
assert (seen == np.arange(size)).all(), seen
win.Free()
assert win == MPI.WIN_NULL

# Atomicity: every rank adds one to rank 0's counter many times at once; no increment is lost, and the
# values fetched are each count exactly once.
rounds = 40
counter = MPI.Win.Allocate(8 if rank == 0 else 0, 8, MPI.INFO_NULL, comm)
one, fetched = np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
mine = []
counter.Lock_all()
for _ in range(rounds):
    counter.Fetch_and_op(one, fetched, 0, 0, MPI.SUM)
    counter.Flush(0)
    mine.append(int(fetched[0]))
counter.Unlock_all()
everyone = sorted(v for values in comm.allgather(mine) for v in values)
assert everyone == list(range(size * rounds)), everyone
comm.Barrier()
if rank == 0:
    assert int(np.frombuffer(counter.tomemory(), dtype=np.int64)[0]) == size * rounds

# Compare_and_swap: of all ranks trying to claim slot 0 of rank 0 (which holds 0), exactly one wins.
comm.Barrier()
claimed = np.zeros(1, dtype=np.int64)
if rank == 0:
    counter.Lock(0)
    counter.Put(np.zeros(1, dtype=np.int64), 0)
    counter.Unlock(0)
comm.Barrier()
counter.Lock(0, MPI.LOCK_SHARED)
counter.Compare_and_swap(np.array([rank + 1], dtype=np.int64), np.zeros(1, dtype=np.int64), claimed, 0, 0)
counter.Unlock(0)
winners = comm.allgather(int(claimed[0]) == 0)
assert winners.count(True) == 1, winners
counter.Free()

# Get_accumulate with MAX and Accumulate with SUM, checked against numpy.
values = np.zeros(4, dtype=np.float64)
win = MPI.Win.Create(values, 8, MPI.INFO_NULL, comm)
win.Fence()
win.Accumulate(np.arange(4, dtype=np.float64) * (rank + 1), 0, op=MPI.SUM)
win.Fence()
if rank == 0:
    assert np.array_equal(values, np.arange(4) * sum(r + 1 for r in range(size))), values
comm.Barrier()  # the lock epochs below may change rank 0's memory; not before it has looked
before = np.zeros(4, dtype=np.float64)
win.Lock(0)
win.Get_accumulate(np.full(4, 1e6, dtype=np.float64), before, 0, op=MPI.MAX)
win.Unlock(0)
assert (before == np.arange(4) * sum(r + 1 for r in range(size))).all() or (before == 1e6).all(), before
win.Fence()
if rank == 0:
    assert (values == 1e6).all(), values
win.Free()

# Passive target: rank 0 makes no MPI call until the others' Lock/Put/Unlock have landed in its memory.
box = np.zeros(size, dtype=np.int32)
win = MPI.Win.Create(box, 4, MPI.INFO_NULL, comm)
comm.Barrier()
if rank == 0:
    expected = [r * 10 for r in range(1, size)]
    deadline = time.monotonic() + 30
    while list(box[1:]) != expected:
        assert time.monotonic() < deadline, f"the others' Puts did not land without rank 0's help: {box}"
        time.sleep(0.01)
else:
    win.Lock(0)
    win.Put(np.array([rank * 10], dtype=np.int32), 0, rank)
    win.Unlock(0)
comm.Barrier()

# Post/Start/Complete/Wait: rank 0 exposes its window to the others, which each write their slot.
group = win.Get_group()
if rank == 0:
    others = group.Excl([0])
    win.Post(others)
    win.Wait()
    assert list(box[1:]) == [-r for r in range(1, size)], box
elif size > 1:
    root = group.Incl([0])
    win.Start(root)
    win.Put(np.array([-rank], dtype=np.int32), 0, rank)
    win.Complete()
win.Free()

# A dynamic window: memory attached after creation, addressed by MPI.Get_address.
attached = np.zeros(2, dtype=np.int64)
win = MPI.Win.Create_dynamic(MPI.INFO_NULL, comm)
win.Attach(attached)
addresses = comm.allgather(MPI.Get_address(attached))
comm.Barrier()
right = (rank + 1) % size
win.Lock(right)
win.Put(np.array([rank, 7], dtype=np.int64), right, addresses[right])
win.Unlock(right)
comm.Barrier()
assert list(attached) == [(rank - 1) % size, 7], attached
win.Detach(attached)
win.Free()

# A shared window: each rank's part is memory every rank reads directly.
win = MPI.Win.Allocate_shared(8, 8, MPI.INFO_NULL, comm)
np.frombuffer(win.tomemory(), dtype=np.int64)[0] = 100 + rank
comm.Barrier()
for other in range(size):
    part, unit = win.Shared_query(other)
    assert unit == 8 and int(np.frombuffer(part, dtype=np.int64)[0]) == 100 + other
comm.Barrier()
win.Free()

# Misuse is refused before any data moves.
target = np.zeros(2, dtype=np.int32)
win = MPI.Win.Create(target, 4, MPI.INFO_NULL, comm)
try:
    win.Put(np.ones(2, dtype=np.int32), 0)
    raise AssertionError("a Put outside any epoch went through")
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_RMA_SYNC, exc
win.Fence()
try:
    win.Put(np.ones(3, dtype=np.int32), (rank + 1) % size)
    raise AssertionError("a Put past the end of the target's window went through")
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_RMA_RANGE, exc
win.Fence()
assert (target == 0).all(), target
win.Free()

print(f"OK rank {rank} of {size}", flush=True)

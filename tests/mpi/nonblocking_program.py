"""Run by test_mpi_face.py under `meshcomm run -n N`: started collectives keep MPI's order and let a rank go on."""

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# A started barrier lets rank 0 go on to a synchronous send that rank 1 receives before it reaches the barrier:
# a barrier run at once would wait for rank 1, which waits for the send.
if size > 1 and rank == 0:
    barrier = comm.Ibarrier()
    comm.Ssend(np.array([42], dtype=np.int64), dest=1, tag=5)
    barrier.Wait()
elif size > 1 and rank == 1:
    got = np.zeros(1, dtype=np.int64)
    comm.Recv(got, source=0, tag=5)
    assert got[0] == 42, got
    comm.Ibarrier().Wait()
else:
    comm.Ibarrier().Wait()

# A blocking collective issued while a started one runs comes after it, on every rank.
shared = np.full(4, float(rank))
started = comm.Ibcast(shared, root=size - 1)
total = np.zeros(1)
comm.Allreduce(np.array([rank + 1.0]), total)
started.Wait()
assert (shared == size - 1).all() and total[0] == size * (size + 1) / 2, (shared, total)

# Many in flight at once complete in the order they were started.
outs = [np.zeros(2, dtype=np.int64) for _ in range(6)]
requests = [comm.Iallreduce(np.array([k, rank * k], dtype=np.int64), outs[k], op=MPI.SUM) for k in range(6)]
MPI.Request.Waitall(requests)
assert not any(requests)
for k, out in enumerate(outs):
    assert list(out) == [k * size, k * size * (size - 1) // 2], (k, out)

# A new communicator made while a collective is pending.
gathered = np.zeros(size, dtype=np.int32)
pending = comm.Iallgather(np.array([rank], dtype=np.int32), gathered)
dup = comm.Dup()
pending.Wait()
assert list(gathered) == list(range(size)) and dup.allreduce(1) == size
dup.Free()

# A persistent collective runs again on each Start, on the buffers' contents at that time.
send, recv = np.zeros(3), np.zeros(3)
persistent = comm.Allreduce_init(send, recv, MPI.SUM)
assert persistent and persistent.Test()  # inactive until started: completes at once
for round_ in range(3):
    send[:] = rank + round_
    persistent.Start()
    try:
        persistent.Start()
        raise AssertionError("a second Start on an active request was accepted")
    except MPI.Exception as exc:
        assert exc.Get_error_class() == MPI.ERR_REQUEST and "already active" in str(exc), exc
    persistent.Wait()
    assert (recv == sum(r + round_ for r in range(size))).all(), (round_, recv)
    assert persistent  # inactive, not null
persistent.Free()
assert not persistent

# A started collective's error comes back from its Wait, and the communicator goes on.
failed = comm.Ibcast(np.zeros(2), root=size)
try:
    failed.Wait()
    raise AssertionError("a bad root was accepted")
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_ROOT and f"root must be a rank in [0, {size})" in str(exc), exc
assert comm.allreduce(rank) == size * (size - 1) // 2

print(f"OK rank {rank} of {size}", flush=True)

"""Run by test_mpi_face.py under `meshcomm run -n N`: each rank checks the MPI face and prints OK."""

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Buffer point-to-point in a ring, with Status and Get_count.
right, left = (rank + 1) % size, (rank - 1) % size
out = np.full(5, rank, dtype=np.int32)
got = np.zeros(8, dtype=np.int32)
status = MPI.Status()
requests = [comm.Irecv([got, MPI.INT], source=MPI.ANY_SOURCE, tag=7), comm.Isend(out, dest=right, tag=7)]
MPI.Request.Waitall(requests, [status, MPI.Status()])
assert status.Get_source() == left and status.Get_tag() == 7 and status.Get_count(MPI.INT) == 5, status
assert (got[:5] == left).all() and not any(requests)

# Probe reports the size of a message before it is received.
comm.send(list(range(rank + 1)), dest=right, tag=3)
probed = MPI.Status()
comm.Probe(source=left, tag=MPI.ANY_TAG, status=probed)
assert probed.tag == 3 and probed.Get_count() > 0
assert comm.recv(source=left, tag=3) == list(range(left + 1))

# Reductions meshcomm folds itself: MAXLOC on (value, index) pairs, logical ops.
pairs = np.zeros(2, dtype=MPI.DOUBLE_INT.dtype)
pairs["value"], pairs["index"] = [rank % 2, -rank], rank
result = np.zeros_like(pairs)
comm.Allreduce([pairs, MPI.DOUBLE_INT], [result, MPI.DOUBLE_INT], op=MPI.MAXLOC)
assert result["value"][0] == (1 if size > 1 else 0) and result["index"][0] == (1 if size > 1 else 0), result
assert result["value"][1] == 0 and result["index"][1] == 0, result
flags = np.array([rank == 0, True], dtype=np.int32)
comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.LAND)
assert list(flags) == [size == 1, 1]

# Uneven v-collectives: rank r contributes r + 1 elements.
mine = np.full(rank + 1, float(rank))
counts = [r + 1 for r in range(size)]
everything = np.zeros(sum(counts))
comm.Allgatherv(mine, [everything, counts, MPI.DOUBLE])
assert list(everything) == [float(r) for r in range(size) for _ in range(r + 1)]

# Split: odd and even ranks; UNDEFINED gives COMM_NULL.
half = comm.Split(rank % 2, key=-rank)
assert half.Get_size() == len(range(rank % 2, size, 2)) and half.allreduce(1) == half.Get_size()
half.Free()
assert half == MPI.COMM_NULL
rest = comm.Split(MPI.UNDEFINED if rank == 0 else 0)
assert (rest == MPI.COMM_NULL) == (rank == 0)
if rest:
    assert rest.Get_size() == size - 1 and rest.Get_rank() == rank - 1
    rest.Free()

# Errors carry MPI's error classes.
for call, error_class in ((lambda: comm.send(1, dest=size), MPI.ERR_RANK), (lambda: comm.bcast(1, root=-1), MPI.ERR_ROOT),
                          (lambda: comm.send(1, dest=0, tag=-5), MPI.ERR_TAG)):
    try:
        call()
    except MPI.Exception as exc:
        assert exc.Get_error_class() == error_class, exc
    else:
        raise AssertionError("no MPI.Exception")

print(f"OK rank {rank} of {size}", flush=True)

"""Run by test_datatypes.py under `meshcomm run -n N`: buffers described by derived datatypes, between ranks."""

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# A matrix column (a vector type) to the right neighbour, received into a column of a Fortran-order subarray.
matrix = np.arange(20, dtype=np.float64).reshape(4, 5) + 100 * rank
column = MPI.DOUBLE.Create_vector(4, 1, 5).Commit()
target = np.full((6, 3), -1.0, order="F")
corner = MPI.DOUBLE.Create_subarray([6, 3], [4, 1], [1, 2], order=MPI.ORDER_F).Commit()  # target[1:5, 2]
receive = comm.Irecv([target, 1, corner], source=left, tag=1)
comm.Send([matrix, 1, column], dest=right, tag=1)
receive.Wait()
expected = np.full((6, 3), -1.0, order="F")
expected[1:5, 2] = (np.arange(20, dtype=np.float64).reshape(4, 5) + 100 * left)[:, 0]
assert np.array_equal(target, expected), (target, expected)

# Bcast with an indexed-block type: only every third element moves.
for root in range(size):
    data = np.arange(12, dtype=np.int32) * (root + 1) if rank == root else np.full(12, -7, dtype=np.int32)
    every_third = MPI.INT.Create_indexed_block(1, list(range(0, 12, 3))).Commit()
    comm.Bcast([data, 1, every_third], root=root)
    expected = np.arange(12, dtype=np.int32) * (root + 1)
    if rank != root:
        expected[np.arange(12) % 3 != 0] = -7
    assert np.array_equal(data, expected), (root, data)

# Alltoallw: rank r sends rank j (j + 1) doubles from a block of its own; each piece lands every second slot.
send = np.concatenate([np.full(j + 1, 10.0 * rank + j) for j in range(size)])
send_displs = [8 * sum(range(1, j + 1)) for j in range(size)]
send_types = [MPI.DOUBLE.Create_contiguous(j + 1).Commit() for j in range(size)]
strided = MPI.DOUBLE.Create_vector(rank + 1, 1, 2).Commit()
for start in ("blocking", "nonblocking", "persistent"):
    recv = np.full(2 * (rank + 1) * size, -1.0)
    recv_displs = [8 * 2 * (rank + 1) * i for i in range(size)]
    smsg = [send, ([1] * size, send_displs), send_types]
    rmsg = [recv, ([1] * size, recv_displs), [strided] * size]
    if start == "blocking":
        comm.Alltoallw(smsg, rmsg)
    elif start == "nonblocking":
        comm.Ialltoallw(smsg, rmsg).Wait()
    else:
        request = comm.Alltoallw_init(smsg, rmsg)
        request.Start()
        request.Wait()
        request.Free()
    expected = np.full((size, rank + 1, 2), -1.0)
    expected[:, :, 0] = (10.0 * np.arange(size) + rank)[:, None]
    assert np.array_equal(recv, expected.reshape(-1)), (start, recv, expected.reshape(-1))

# v-collectives: each rank's two ints land in every other slot (a type resized to two ints' extent) at the root,
# and Allgather / Scatter through a vector type.
spaced = MPI.INT.Create_resized(0, 8).Commit()
mine = np.array([rank, 10 + rank], dtype=np.int32)
gathered = np.full(4 * size, -1, dtype=np.int32)
comm.Gatherv(mine, [gathered, [2] * size, [2 * r for r in range(size)], spaced], root=0)
if rank == 0:
    expected = np.full(4 * size, -1, dtype=np.int32)
    expected[0::2] = np.stack([np.arange(size), 10 + np.arange(size)], axis=1).reshape(-1)
    assert np.array_equal(gathered, expected), gathered
everyone = np.full((size, 3), -1.0)
comm.Allgather(np.full(2, float(rank)), [everyone, MPI.DOUBLE.Create_vector(2, 1, 1).Create_resized(0, 24)])
expected = np.full((size, 3), -1.0)
expected[:, :2] = np.arange(size)[:, None]
assert np.array_equal(everyone, expected), everyone
table = np.arange(3 * size, dtype=np.float64).reshape(3, size)
column = np.zeros(3)
comm.Scatter([table, 1, MPI.DOUBLE.Create_vector(3, 1, size).Create_resized(0, 8)], column, root=0)
assert np.array_equal(column, np.arange(3 * size, dtype=np.float64).reshape(3, size)[:, rank]), column

# Absolute addresses: a struct of two arrays sent from MPI.BOTTOM, received into one packed record array.
ints, doubles = np.arange(3, dtype=np.int32) + rank, np.linspace(0, 1, 2) + rank
record = MPI.Datatype.Create_struct([3, 2], [MPI.Get_address(ints), MPI.Get_address(doubles)],
                                    [MPI.INT, MPI.DOUBLE]).Commit()
packed = np.zeros(1, dtype=np.dtype([("i", "i4", 3), ("d", "f8", 2)], align=True))
packed_type = MPI.Datatype.Create_struct([3, 2], [0, packed.dtype.fields["d"][1]], [MPI.INT, MPI.DOUBLE]).Commit()
comm.Sendrecv([MPI.BOTTOM, 1, record], dest=right, sendtag=2, recvbuf=[packed, 1, packed_type], source=left, recvtag=2)
assert np.array_equal(packed["i"][0], np.arange(3) + left) and np.allclose(packed["d"][0], np.linspace(0, 1, 2) + left)

print(f"OK rank {rank} of {size}")

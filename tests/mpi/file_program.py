"""Run by test_file_io.py under `meshcomm run -n N`: one file shared by every rank, through MPI.File."""

import os
import pathlib
import tempfile

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
path = comm.bcast(str(pathlib.Path(tempfile.mkdtemp(prefix="meshcomm-io-")) / "data") if rank == 0 else None,
                  root=0)

# A failure on one rank (rank 0 cannot create a file that exists) is raised on every rank, with rank 0's class.
if rank == 0:
    pathlib.Path(path).write_bytes(b"")
comm.Barrier()
try:
    MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_EXCL)
    raise AssertionError("MODE_EXCL opened a file that exists")
except MPI.Exception as error:
    assert error.Get_error_class() == MPI.ERR_FILE_EXISTS, error
comm.Barrier()

fh = MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_DELETE_ON_CLOSE)

# Shared pointer: every rank appends records of its own at once; each lands whole, none overlaps another.
records = 6
for n in range(records):
    fh.Write_shared(np.full(4, rank * 100 + n, dtype=np.int64))
fh.Sync()
assert fh.Get_position_shared() == 8 * 4 * records * size
everything = np.empty(4 * records * size, dtype=np.int64)
fh.Read_at_all(0, everything)
rows = everything.reshape(-1, 4)
assert (rows == rows[:, :1]).all(), rows
assert sorted(rows[:, 0].tolist()) == sorted(r * 100 + n for r in range(size) for n in range(records))
mine = [int(v) for v in rows[:, 0] if v // 100 == rank]
assert mine == [rank * 100 + n for n in range(records)], mine  # a rank's own records keep their order

# Ordered: rank r's block follows ranks 0..r-1's, from the shared pointer on.
fh.Set_size(0)
fh.Set_view(0, MPI.INT)
fh.Write_ordered(np.full(rank + 1, rank, dtype=np.int32))
fh.Sync()
expected = np.concatenate([np.full(r + 1, r, dtype=np.int32) for r in range(size)])
back = np.empty(expected.size, dtype=np.int32)
fh.Read_at(0, back)
assert (back == expected).all(), back

# A strided view: rank r owns every size-th int, so all ranks' Write_all interleave into 0, 1, 2, ...
fh.Set_size(0)
column = MPI.INT.Create_vector(1, 1, size).Create_resized(0, 4 * size).Commit()
fh.Set_view(4 * rank, MPI.INT, column)
fh.Write_all(np.arange(rank, 5 * size, size, dtype=np.int32))
fh.Sync()
fh.Set_view(0, MPI.INT)
whole = np.empty(5 * size, dtype=np.int32)
fh.Read_all(whole)
assert (whole == np.arange(5 * size)).all(), whole
column.Free()

# Atomic mode: every rank overwrites the same 4096 strided ints at once (one pwrite per int); each access
# holds its lock throughout, so what is left is one rank's data, never a mix.
fh.Set_atomicity(True)
strided = MPI.INT.Create_vector(4096, 1, 2).Commit()
fh.Set_view(0, MPI.INT, strided)
block = np.full(4096, rank, dtype=np.int32)
for _ in range(4):
    fh.Write_at(0, block)
fh.Sync()
back = np.empty(block.size, dtype=np.int32)
fh.Read_at(0, back)
assert (back == back[0]).all(), np.unique(back)
strided.Free()

fh.Close()
comm.Barrier()
assert not os.path.exists(path)  # MODE_DELETE_ON_CLOSE
print(f"OK rank {rank} of {size}", flush=True)

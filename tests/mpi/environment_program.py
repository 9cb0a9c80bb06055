"""Run by test_environment_handles.py under `meshcomm run -n N`: attributes, error handlers and info follow Dup."""

import numpy as np

from meshcomm import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()

# Predefined attributes hold on every rank; UNIVERSE_SIZE is the job's size.
assert world.Get_attr(MPI.TAG_UB) >= 32767 and world.Get_attr(MPI.UNIVERSE_SIZE) == size
assert world.Get_attr(MPI.APPNUM) == 0 and world.Get_attr(MPI.WTIME_IS_GLOBAL) in (False, True)

# A copy callback decides what a duplicate holds; the delete callback runs when the duplicate is freed.
deleted = []
keyval = MPI.Comm.Create_keyval(copy_fn=lambda comm, k, value: value * 10,
                                delete_fn=lambda comm, k, value: deleted.append(value))
world_dup = world.Dup()
world_dup.Set_attr(keyval, rank + 1)
second = world_dup.Dup()
assert second.Get_attr(keyval) == 10 * (rank + 1), second.Get_attr(keyval)
# The duplicate is a working communicator: its ranks sum what the copy gave each of them.
total = np.zeros(1, dtype=np.int64)
second.Allreduce(np.array([second.Get_attr(keyval)], dtype=np.int64), total)
assert total[0] == 10 * size * (size + 1) // 2, total
second.Free()
assert deleted == [10 * (rank + 1)], deleted
world_dup.Delete_attr(keyval)
assert deleted == [10 * (rank + 1), rank + 1] and world_dup.Get_attr(keyval) is None, deleted
MPI.Comm.Free_keyval(keyval)

# A duplicate inherits its parent's error handler and info.
calls = []
handler = MPI.Comm.Create_errhandler(lambda comm, code: calls.append(code))
world_dup.Set_errhandler(handler)
world_dup.Set_info(MPI.Info.Create({"note": f"rank{rank}"}))
child = world_dup.Dup()
child.Call_errhandler(MPI.ERR_TAG)
assert calls == [MPI.ERR_TAG], calls
half = world_dup.Split(rank % 2, rank)
half.Call_errhandler(MPI.ERR_RANK)  # Split passes the error handler on, not the info
assert calls == [MPI.ERR_TAG, MPI.ERR_RANK] and half.Get_info().Get("note") is None, calls
half.Free()
info = child.Get_info()
assert info.Get("note") == f"rank{rank}", info.items()
info.Free()
child.Free()
world_dup.Free()
handler.Free()

# An added error class is numbered above ERR_LASTCODE and LASTUSEDCODE follows it.
errorclass = MPI.Add_error_class()
assert errorclass > MPI.ERR_LASTCODE and world.Get_attr(MPI.LASTUSEDCODE) == errorclass
MPI.Remove_error_class(errorclass)
print(f"OK rank {rank} of {size}", flush=True)

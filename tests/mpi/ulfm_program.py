"""ULFM with a real failure, under `meshcomm run --on-failure continue`: the last rank is SIGKILLed; the others see
the failure, revoke, find the failed rank, agree and shrink, then compute exactly on the shrunk communicator.
Every survivor prints "SURVIVED r of n" (its old rank and size) when all its checks held."""

import os
import signal

import numpy as np

from meshcomm import MPI

comm = MPI.COMM_WORLD.Dup()
rank, size = comm.Get_rank(), comm.Get_size()
victim = size - 1
comm.Barrier()
if rank == victim:
    os.kill(os.getpid(), signal.SIGKILL)
try:
    for _ in range(1000):
        comm.Allreduce(MPI.IN_PLACE, np.ones(2))
except Exception:  # the failure, as a meshcomm error or an MPI.Exception
    pass
comm.Revoke()
assert comm.Is_revoked()
try:
    comm.Barrier()
    raise AssertionError("a revoked communicator's Barrier returned")
except MPI.Exception as exc:
    assert exc.Get_error_class() == MPI.ERR_REVOKED
failed = comm.Get_failed()
assert failed.Get_size() == 1 and MPI.Group.Translate_ranks(failed, [0], comm.Get_group()) == [victim], failed
assert comm.Agree(0b1111 if rank else 0b0101) == 0b0101
shrunk = comm.Shrink()
assert shrunk.Get_size() == size - 1 and shrunk.Get_rank() == rank
total = np.array([rank + 1.0])
shrunk.Allreduce(MPI.IN_PLACE, total)
assert total[0] == sum(r + 1 for r in range(size - 1)), total
assert shrunk.allgather(rank) == list(range(size - 1))
shrunk.Barrier()
print(f"SURVIVED {rank} of {size}", flush=True)

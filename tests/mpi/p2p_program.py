"""Run by test_point_to_point.py under `meshcomm run -n N`: matched probes, persistent and paired sends, pkl5."""

import numpy as np

from meshcomm import MPI
from meshcomm.mpi.util import pkl5

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# Matched probes from every rank at once: each message is received exactly once, by the Message that claimed it.
for sender in range(size):
    comm.Isend(np.full(3 + sender, 10 * rank + sender, dtype=np.int32), dest=sender, tag=7).Wait()
seen = {}
for _ in range(size):
    status = MPI.Status()
    message = comm.Mprobe(MPI.ANY_SOURCE, 7, status)
    assert comm.Improbe(status.source, 7) is None, "a claimed message was still visible to probes"
    got = np.empty(status.Get_count(MPI.INT), dtype=np.int32)
    message.Recv(got)
    assert not message
    seen[status.source] = got
assert sorted(seen) == list(range(size)), seen
for source, got in seen.items():
    assert (got == 10 * source + rank).all() and got.size == 3 + rank, (source, got)

# Persistent ring: the send reads its buffer at each Start, so each round carries that round's data.
out, into = np.zeros(5), np.zeros(5)
send = comm.Ssend_init(out, dest=right, tag=3)
receive = comm.Recv_init(into, source=left, tag=3)
for round_number in range(4):
    out[:] = np.arange(5) + 100 * round_number + rank
    MPI.Prequest.Startall([receive, send])
    MPI.Request.Waitall([send, receive])
    assert (into == np.arange(5) + 100 * round_number + left).all(), (round_number, into)
    assert send and receive  # inactive, not freed
send.Free()
receive.Free()

# Isendrecv_replace around the ring: every rank ends up with its left neighbour's values.
values = np.full(4, float(rank))
status = MPI.Status()
comm.Isendrecv_replace(values, dest=right, sendtag=9, source=left, recvtag=9).Wait(status)
assert (values == left).all() and status.source == left and status.tag == 9, (values, status)

# Partitioned ring: partitions marked ready last to first arrive in place.
out, into = np.arange(6, dtype=np.int64) + 10 * rank, np.zeros(6, dtype=np.int64)
send, receive = comm.Psend_init(out, 3, dest=right, tag=2), comm.Precv_init(into, 3, source=left, tag=2)
MPI.Prequest.Startall([receive, send])
for partition in (2, 1, 0):
    send.Pready(partition)
MPI.Request.Waitall([send, receive])
assert np.array_equal(into, np.arange(6) + 10 * left), into

# pkl5: arrays cut into 100-byte pieces arrive whole; collectives check against numpy.
pkl5._bigmpi.blocksize = 100
pkl5.pickle.THRESHOLD = 0
big = pkl5.Intracomm(comm)
array = np.arange(1000, dtype=np.float64) * (rank + 1)
got = big.sendrecv(array, dest=right, sendtag=1, source=left, recvtag=1)
assert np.array_equal(got, np.arange(1000, dtype=np.float64) * (left + 1))
gathered = big.gather(np.full(50, rank), root=size - 1)
if rank == size - 1:
    assert np.array_equal(np.stack(gathered), np.repeat(np.arange(size), 50).reshape(size, 50))
else:
    assert gathered is None
assert np.array_equal(big.bcast(np.arange(300) if rank == 0 else None, root=0), np.arange(300))
crossed = big.alltoall([np.full(30, rank * size + peer) for peer in range(size)])
assert [int(piece[0]) for piece in crossed] == [peer * size + rank for peer in range(size)], crossed

comm.Barrier()
print(f"OK rank {rank} of {size}", flush=True)

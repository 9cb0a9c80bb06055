"""Run by test_groups_and_topologies.py under `meshcomm run -n N`: groups, topologies, neighbourhood collectives.

Every expectation is computed here from coordinates and ranks with numpy,
not with the topology calls under test.
"""

import numpy as np

from meshcomm import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def refused(kind, call, *args, error_class=None) -> bool:
    """Whether call(*args) raises `kind` (an MPI.Exception of `error_class`, when given)."""
    try:
        call(*args)
    except kind as exc:
        return error_class is None or exc.Get_error_class() == error_class
    return False


# On COMM_SELF, on every rank: one-rank grids, the classes' checks, handles.
cart = MPI.COMM_SELF.Create_cart([1, 1], periods=[True, False])
assert isinstance(cart, MPI.Cartcomm) and cart.topo == ([1, 1], [True, False], [0, 0])
assert cart.inedges == [0, 0, MPI.PROC_NULL, MPI.PROC_NULL]
got = np.full(4, -1, dtype=np.int64)
cart.Neighbor_alltoall(np.array([10, 11, 12, 13], dtype=np.int64), got)
assert got.tolist() == [11, 10, -1, -1], got  # in a periodic dimension of one, down comes back from above
assert MPI.Comm(cart).Get_topology() == MPI.CART and MPI.Cartcomm(MPI.Comm(cart)) == cart
assert refused(TypeError, MPI.Graphcomm, cart) and refused(TypeError, MPI.Topocomm, MPI.COMM_SELF)
assert MPI.Comm(cart).toint() == cart.toint() != MPI.COMM_SELF.toint()
back = MPI.Comm.fromint(cart.toint())
assert type(back) is MPI.Cartcomm and back == cart and back.dims == [1, 1]
assert MPI.Comm.f2py(MPI.COMM_SELF.py2f()) == MPI.COMM_SELF and MPI.Comm.fromhandle(0) == MPI.COMM_NULL
dup = cart.Dup()
assert type(dup) is MPI.Cartcomm and dup.dims == [1, 1] and dup != cart
dup.Free()
cart.Free()
assert refused(ValueError, MPI.COMM_SELF.Create_cart, [1], [True, False])
assert refused(MPI.Exception, MPI.COMM_SELF.Create_cart, [2], error_class=MPI.ERR_DIMS)
assert refused(MPI.Exception, MPI.COMM_SELF.Create_graph, [1], [1], error_class=MPI.ERR_ARG)
assert refused(ValueError, MPI.COMM_SELF.Create_dist_graph_adjacent, [0], [0], MPI.WEIGHTS_EMPTY, MPI.WEIGHTS_EMPTY)
assert not hasattr(MPI.COMM_SELF, "Neighbor_allgather")  # as in mpi4py, only communicators with a topology

# A periodic grid; a block sent down a dimension arrives in the receiver's "from above" slot, and back.
dims = MPI.Compute_dims(size, 2)
assert int(np.prod(dims)) == size and dims == sorted(dims, reverse=True), dims
cart = world.Create_cart(dims, periods=True)
here = np.array(np.unravel_index(rank, dims))
below = [int(np.ravel_multi_index(tuple(np.where(np.arange(2) == d, (here - 1) % dims, here)), dims)) for d in range(2)]
above = [int(np.ravel_multi_index(tuple(np.where(np.arange(2) == d, (here + 1) % dims, here)), dims)) for d in range(2)]
assert cart.coords == here.tolist() and [cart.Shift(d, 1) for d in range(2)] == list(zip(below, above))
send = np.array([1000 * rank + slot for slot in range(4)], dtype=np.int64)
got = np.full(4, -1, dtype=np.int64)
cart.Neighbor_alltoall(send, got)
expected = [value for d in range(2) for value in (1000 * below[d] + 2 * d + 1, 1000 * above[d] + 2 * d)]
assert got.tolist() == expected, (rank, got, expected)

# Sub-grids: rows of the grid add up what numpy adds up along the same axis.
row = cart.Sub([False, True])
assert row.dims == [dims[1]] and row.Get_size() == dims[1]
total = np.zeros(1, dtype=np.int64)
row.Allreduce(np.array([rank], dtype=np.int64), total)
assert total[0] == np.arange(size).reshape(dims).sum(axis=1)[here[0]], (rank, total)
row.Free()
cart.Free()

# Off the edge of a non-periodic line there is no neighbour: that slot keeps what it held.
line = world.Create_cart([size], periods=False)
got = np.full(2, -7.0)
line.Neighbor_allgather(np.array([rank + 0.5]), got)
assert got.tolist() == [rank - 1 + 0.5 if rank > 0 else -7.0, rank + 1 + 0.5 if rank < size - 1 else -7.0], got
line.Free()

# Two edges to the same neighbour: the k-th one sent meets the k-th one received, in every call.
left, right = (rank - 1) % size, (rank + 1) % size
ring = world.Create_dist_graph_adjacent([left, left], [right, right], [5, 6], [7, 8])
assert ring.Get_dist_neighbors() == ([left, left], [right, right], ([5, 6], [7, 8]))
for call in range(3):
    got = np.zeros(2, dtype=np.int32)
    ring.Neighbor_alltoall(np.array([10 * rank + call, 10 * rank + call + 100], dtype=np.int32), got)
    assert got.tolist() == [10 * left + call, 10 * left + call + 100], (call, got)

# A user receive for any source and tag, posted first, takes the user's message, not the collective's.
user_box = np.zeros(1, dtype=np.int64)
pending = ring.Irecv(user_box, MPI.ANY_SOURCE, MPI.ANY_TAG)
uneven = np.zeros(left + 1 + left + 1, dtype=np.float64)
request = ring.Ineighbor_allgatherv(np.full(rank + 1, float(rank)), [uneven, [left + 1, left + 1], MPI.DOUBLE])
request.Wait()
assert uneven.tolist() == [float(left)] * (2 * left + 2), uneven
ring.Send(np.array([rank * 3], dtype=np.int64), right, tag=9)
status = MPI.Status()
pending.Wait(status)
assert user_box[0] == left * 3 and status.Get_source() == left and status.Get_tag() == 9, user_box

# A persistent neighbourhood collective reads its send buffer anew at each Start.
outgoing, incoming = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
persistent = ring.Neighbor_alltoall_init(outgoing, incoming)
for start in range(3):
    outgoing[:] = [rank * 100 + start, rank * 100 + start + 50]
    persistent.Start()
    persistent.Wait()
    assert incoming.tolist() == [left * 100 + start, left * 100 + start + 50], (start, incoming)
persistent.Free()
assert ring.neighbor_alltoall([{"from": rank, "k": 0}, {"from": rank, "k": 1}]) == [
    {"from": left, "k": 0}, {"from": left, "k": 1}]
ring.Free()

# Edges named by any rank: rank r declares r -> (r + 1) and r -> (r + 2); everyone learns its own.
graph = world.Create_dist_graph([rank], [2], [(rank + 1) % size, (rank + 2) % size])
sources, destinations, weights = graph.Get_dist_neighbors()
assert sorted(sources) == sorted([(rank - 1) % size, (rank - 2) % size]) and weights is None, sources
assert destinations == [(rank + 1) % size, (rank + 2) % size], destinations
got = graph.neighbor_allgather(rank)
assert got == sources, (got, sources)
graph.Free()
weighted = world.Create_dist_graph([rank], [2], [(rank + 1) % size, (rank + 2) % size], [10 * rank + 1, 10 * rank + 2])
sources, destinations, (in_weights, out_weights) = weighted.Get_dist_neighbors()
assert out_weights == [10 * rank + 1, 10 * rank + 2], out_weights
assert sorted(zip(sources, in_weights)) == sorted([((rank - 1) % size, 10 * ((rank - 1) % size) + 1),
                                                   ((rank - 2) % size, 10 * ((rank - 2) % size) + 2)]), in_weights
weighted.Free()

# Groups: a communicator over the ranks in reverse order, and one made by the odd ranks alone.
reverse = world.Get_group().Incl(list(range(size - 1, -1, -1)))
backwards = world.Create(reverse)
assert backwards.Get_rank() == size - 1 - rank
assert backwards.allgather(rank) == list(range(size - 1, -1, -1))
backwards.Free()
odd = world.Get_group().Incl([r for r in range(size) if r % 2])
if rank % 2:
    odd_comm = world.Create_group(odd, tag=3)
    assert odd_comm.allreduce(rank) == sum(r for r in range(size) if r % 2)
    odd_comm.Free()
else:
    assert world.Create_group(odd, tag=3) == MPI.COMM_NULL
world.Barrier()

print(f"OK rank {rank} of {size}", flush=True)

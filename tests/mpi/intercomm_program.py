"""Run by test_intercomm.py under `meshcomm run -n N`: intercommunicators between the even and the odd ranks.

Every value a rank checks is computed here from world ranks with numpy,
independently of the code under test. With one rank only the local rules
are checked (there is no second group to talk to).
"""

import numpy as np

from meshcomm import MPI
from program_checks import raises

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


# ----- what holds with any number of ranks
parent = MPI.Comm.Get_parent()
assert isinstance(parent, MPI.Intercomm) and parent == MPI.COMM_NULL
assert not world.Is_inter() and world.Is_intra()
raises(MPI.ERR_COMM, MPI.Intercomm().Get_remote_size)
raises(MPI.ERR_RANK, world.Create_intercomm, size, world, 0)
assert "must be disjoint" in raises(MPI.ERR_COMM, MPI.COMM_SELF.Create_intercomm, 0, MPI.COMM_SELF, 0)
try:
    MPI.Intercomm(world)
    raise AssertionError("an intracommunicator became an Intercomm")
except TypeError:
    pass

if size == 1:
    print(f"OK rank {rank} of {size}", flush=True)
    raise SystemExit(0)

# ----- the even ranks (side 0) and the odd ranks (side 1)
color = rank % 2
side = [r for r in range(size) if r % 2 == color]  # world ranks of this side, in local rank order
other = [r for r in range(size) if r % 2 != color]
local = world.Split(color, key=rank)
inter = local.Create_intercomm(0, world, other[0], tag=7)
local.Free()  # the intercomm keeps its own group
me, n, rn = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
assert (me, n, rn) == (side.index(rank), len(side), len(other)), (me, n, rn)
assert inter.Is_inter() and not inter.Is_intra() and inter.remote_size == rn
assert inter.Get_remote_group().Translate_ranks(None, world.Get_group()) == other
try:
    MPI.Intracomm(inter)
    raise AssertionError("an intercommunicator became an Intracomm")
except TypeError:
    pass

# Point-to-point: ranks name the remote group; a status names the remote sender.
sends = [inter.Isend(np.array([rank, r], dtype=np.int64), dest=r, tag=10 + me) for r in range(rn)]
for _ in range(rn):
    got, status = np.zeros(2, dtype=np.int64), MPI.Status()
    inter.Recv(got, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
    sender = status.Get_source()
    assert got.tolist() == [other[sender], me] and status.Get_tag() == 10 + sender, (got, sender)
MPI.Request.Waitall(sends)
inter.Barrier()  # no receive for any tag above is still open when the next messages leave
assert raises(MPI.ERR_RANK, inter.Send, np.zeros(1), dest=rn).endswith(f"got {rn}")
if me == 0:  # the leaders swap their world ranks
    assert inter.sendrecv(rank, dest=0, source=0) == other[0]

# A receive for any source and tag, posted before a collective, takes the user's message, not the collective's.
pending = inter.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
inter.Barrier()
got = inter.bcast("from side 0" if rank == 0 else None, root=MPI.ROOT if rank == 0 else (0 if color else MPI.PROC_NULL))
assert got == ("from side 0" if color else None), got
inter.send(("user", rank), dest=me % rn, tag=3)
expected_senders = [other[r] for r in range(rn) if r % n == me]  # remote rank r sends to r % (this side's size)
if expected_senders:
    received = [pending.wait()] + [inter.recv(source=MPI.ANY_SOURCE, tag=3) for _ in expected_senders[1:]]
    assert sorted(received) == [("user", s) for s in expected_senders], received
else:
    assert not pending.Test()
    pending.Cancel()
    pending.Wait()


def rooted(root_side: int, root: int):
    """The root argument for a call whose root is local rank `root` of side `root_side`."""
    if color == root_side:
        return MPI.ROOT if me == root else MPI.PROC_NULL
    return root


for root_side in (0, 1):
    for root in range(len([r for r in range(size) if r % 2 == root_side])):
        root_world = [r for r in range(size) if r % 2 == root_side][root]
        role = rooted(root_side, root)

        # Bcast: the root's buffer to every rank of the other side.
        buf = np.arange(5, dtype=np.float64) * (root_world + 1) if role == MPI.ROOT else np.zeros(5)
        inter.Bcast(buf if role != MPI.PROC_NULL else None, root=role)
        if color != root_side:
            assert np.array_equal(buf, np.arange(5) * (root_world + 1.0)), buf

        # Gatherv: remote rank r sends r + 1 values of its world rank; the root sees them in remote rank order.
        if role == MPI.ROOT:
            counts = [i + 1 for i in range(rn)]
            out = np.full(sum(counts), -1, dtype=np.int32)
            inter.Gatherv(None, [out, counts, MPI.INT], root=role)
            assert out.tolist() == [w for i, w in enumerate(other) for _ in range(i + 1)], out
        elif role == MPI.PROC_NULL:
            inter.Gatherv(None, None, root=role)
        else:
            inter.Gatherv(np.full(me + 1, rank, dtype=np.int32), None, root=role)

        # Scatterv: local rank i of the other side gets i + 2 values 100 * i + root's world rank.
        if role == MPI.ROOT:
            pieces = [np.full(i + 2, 100 * i + rank, dtype=np.int64) for i in range(rn)]
            inter.Scatterv([np.concatenate(pieces), [i + 2 for i in range(rn)], MPI.INT64_T], None, root=role)
        elif role == MPI.PROC_NULL:
            inter.Scatterv(None, None, root=role)
        else:
            got = np.zeros(me + 2, dtype=np.int64)
            inter.Scatterv(None, got, root=role)
            assert (got == 100 * me + root_world).all(), got

        # Reduce: the other side's vectors summed at the root.
        if role == MPI.ROOT:
            total = np.zeros(4)
            inter.Reduce(None, total, op=MPI.SUM, root=role)
            assert np.allclose(total, sum(np.arange(4.0) * (w + 1) for w in other)), total
        elif role == MPI.PROC_NULL:
            inter.Reduce(None, None, root=role)
        else:
            inter.Reduce(np.arange(4.0) * (rank + 1), None, op=MPI.SUM, root=role)

        # The object forms of the same calls.
        got = inter.bcast({"root": rank} if role == MPI.ROOT else None, root=role)
        assert got == ({"root": root_world} if color != root_side else None), got
        got = inter.gather(("g", rank), root=role)
        assert got == ([("g", w) for w in other] if role == MPI.ROOT else None), got
        got = inter.scatter([("s", i, rank) for i in range(rn)] if role == MPI.ROOT else None, root=role)
        assert got == (("s", me, root_world) if color != root_side else None), got
        got = inter.reduce(rank, op=MPI.MAX, root=role)
        assert got == (max(other) if role == MPI.ROOT else None), got

# Bad roots are refused before anything moves, on the rank that passed them.
for bad in (-1, rn, MPI.ANY_SOURCE):
    assert "remote group" in raises(MPI.ERR_ROOT, inter.Bcast, np.zeros(1), root=bad)
raises(MPI.ERR_ARG, inter.Allgather, MPI.IN_PLACE, np.zeros(rn))

# Allgatherv: local rank i sends i + 1 copies of its world rank; each side gets the other side's, in order.
recv_counts = [i + 1 for i in range(rn)]
out = np.zeros(sum(recv_counts), dtype=np.int16)
inter.Allgatherv(np.full(me + 1, rank, dtype=np.int16), [out, recv_counts, MPI.SHORT])
assert out.tolist() == [w for i, w in enumerate(other) for _ in range(i + 1)], out
assert inter.allgather(rank * 10) == [w * 10 for w in other]

# Alltoallv: this rank sends remote rank j (j + 1) values 1000 * rank + j, and receives (me + 1) from each.
sendbuf = np.concatenate([np.full(j + 1, 1000 * rank + j, dtype=np.int64) for j in range(rn)])
recvbuf = np.zeros(rn * (me + 1), dtype=np.int64)
inter.Alltoallv([sendbuf, [j + 1 for j in range(rn)], MPI.INT64_T], [recvbuf, [me + 1] * rn, MPI.INT64_T])
assert recvbuf.tolist() == [1000 * w + me for w in other for _ in range(me + 1)], recvbuf
assert inter.alltoall([(rank, j) for j in range(rn)]) == [(w, me) for w in other]

# Allreduce: each side gets the other side's reduction (SUM natively, MAXLOC as pairs).
out = np.zeros(3)
inter.Allreduce(np.array([rank, 1.0, rank ** 2]), out, op=MPI.SUM)
assert out.tolist() == [sum(other), len(other), sum(w ** 2 for w in other)], out
highest = max(w % 3 for w in other)  # MAXLOC: the highest value, and the lowest index holding it
assert inter.allreduce((rank % 3, rank), op=MPI.MAXLOC) == (highest, min(w for w in other if w % 3 == highest))

# Reduce_scatter_block: side X's vectors (remote size * 2 values) are summed and split over side Y.
send = np.arange(2 * rn, dtype=np.float64) + rank
block = np.zeros(2)
inter.Reduce_scatter_block(send, block, op=MPI.SUM)
expected = sum(np.arange(2 * n, dtype=np.float64) + w for w in other)
assert np.array_equal(block, expected[2 * me : 2 * me + 2]), block
# Reduce_scatter: this side takes recvcounts[i] = i + 1 of the other side's reduced vector.
mine_counts, their_counts = [i + 1 for i in range(n)], [i + 1 for i in range(rn)]
part = np.zeros(me + 1, dtype=np.int64)
inter.Reduce_scatter(np.arange(sum(their_counts), dtype=np.int64) * (rank + 1), part, mine_counts, op=MPI.SUM)
expected = sum(np.arange(sum(mine_counts), dtype=np.int64) * (w + 1) for w in other)
start = sum(mine_counts[:me])
assert part.tolist() == expected[start : start + me + 1].tolist(), part

# Started and persistent forms run in the intercomm's lane, in issue order.
first, second = np.zeros(2), np.zeros(1)
requests = [inter.Iallreduce(np.array([rank, 2.0 * rank]), first),
            inter.Iallreduce(np.array([1.0]), second, op=MPI.SUM)]
MPI.Request.Waitall(requests)
assert first.tolist() == [sum(other), 2.0 * sum(other)] and second.tolist() == [len(other)], (first, second)
value, out = np.zeros(1), np.zeros(1)
persistent = inter.Allreduce_init(value, out, MPI.SUM)
for round_ in range(2):
    value[0] = rank + round_
    persistent.Start()
    persistent.Wait()
    assert out[0] == sum(w + round_ for w in other), (round_, out)
persistent.Free()

# Dup keeps both groups; Compare sees it; Split pairs equal colours across the sides.
dup = inter.Dup()
assert MPI.Comm.Compare(inter, dup) == MPI.CONGRUENT and MPI.Comm.Compare(inter, world) == MPI.UNEQUAL
assert dup.allgather(rank) == other
dup.Free()
assert dup == MPI.COMM_NULL
halves = inter.Split(me % 2, key=-me)
if me % 2 < min(2, rn):
    mates = [w for i, w in enumerate(side) if i % 2 == me % 2][::-1]
    partners = [w for i, w in enumerate(other) if i % 2 == me % 2][::-1]
    assert halves.Get_rank() == mates.index(rank) and halves.allgather(rank) == partners
    halves.Free()
else:
    assert halves == MPI.COMM_NULL

# Create: each side keeps the members of its own subgroup (here, all but its first rank when it has more),
# ordered as the group lists them; the others get COMM_NULL.
kept = side[1:][::-1] if len(side) > 1 else side
partners_kept = other[1:][::-1] if len(other) > 1 else other
sub = inter.Create(world.Get_group().Incl(kept))
if rank in kept:
    assert sub.Is_inter() and sub.Get_rank() == kept.index(rank) and sub.Get_remote_size() == len(partners_kept)
    assert sub.allgather(rank) == partners_kept
    sub.Disconnect()
    assert sub == MPI.COMM_NULL
else:
    assert sub == MPI.COMM_NULL

# Merge: the side that passes high=False comes first; here the odd side.
merged = inter.Merge(high=(color == 0))
order = other + side if color == 0 else side + other
assert merged.Get_size() == size and merged.Get_rank() == order.index(rank)
assert merged.allgather(rank) == order
merged.Free()

# Create_from_groups: the same two sides, made from groups alone.
everyone = world.Get_group()
mine_group, their_group = everyone.Incl(side), everyone.Incl(other)
made = MPI.Intercomm.Create_from_groups(mine_group, len(side) - 1, their_group, len(other) - 1, stringtag="test")
assert MPI.Comm.Compare(made, inter) == MPI.CONGRUENT and made.allreduce(rank) == sum(other)
made.Free()
inter.Free()
assert world.allreduce(1) == size
print(f"OK rank {rank} of {size}", flush=True)

"""Intercommunicators: two disjoint groups of ranks, where ranks name the members of the other group.

An Intercomm keeps a Group of its own side's ranks (for the local steps of
its collectives) and two mailboxes to the other side: one for the user's
point-to-point messages, one for its collectives, so a user's receive for
any tag never takes a collective's message. A mailbox sees the other side
as its group (`_OtherSide`), so a source or destination rank is a rank of
the remote group, as MPI says. Both sides agree on fresh group ids the way
Split does: every member offers the lowest id it has free, the leaders
(local rank 0, or the ones Create_intercomm names) swap their side's table,
and everyone takes the highest. Collectives are in intercomm_collectives.py.
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np

from meshcomm.api import collectives as coll
from meshcomm.api import objects
from meshcomm.group.mailbox import Mailbox
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi import world
from meshcomm.mpi.comm import Comm, Intracomm
from meshcomm.mpi.groups import Group

# One row per member, in these columns, is what the two sides swap when they make a communicator.
_GLOBAL_RANK, _COLOR, _KEY, _FREE_ID = range(4)
_IDS_PER_INTERCOMM = 4  # the two sides' Groups, the user's mailbox, the collectives' mailbox


class _OtherSide:
    """What a Mailbox asks of its group, answered for the other side: its ranks are the remote group's."""

    def __init__(self, runtime, remote_ranks: tuple[int, ...], group_id: int, name: str, timeout: float) -> None:
        self.runtime, self.group_id, self.group_name, self.timeout = runtime, group_id, name, timeout
        self.ranks = remote_ranks
        self._rank_of = {global_rank: r for r, global_rank in enumerate(remote_ranks)}

    def global_rank(self, remote_rank: int) -> int:
        return self.ranks[remote_rank]

    def group_rank(self, global_rank: int) -> int:
        return self._rank_of[global_rank]


class InterGroup:
    """An intercommunicator's state, answering what a Comm asks of its group (rank and size are this side's)."""

    def __init__(self, local, remote_ranks: tuple[int, ...], first_id: int) -> None:
        self.local = local  # this side's Group: rank, size, and the local steps of collectives
        self.local_comm = Intracomm._of(local)
        self.runtime, self.timeout = local.runtime, local.timeout
        self.ranks, self.rank, self.size = local.ranks, local.rank, local.size
        self.remote_ranks = remote_ranks
        self.remote_size = len(remote_ranks)
        self.group_id = first_id + 2
        self.group_name = f"intercomm{self.group_id}"
        self.mailbox = self._mailbox_to_other_side(first_id + 2)
        self.channel = self._mailbox_to_other_side(first_id + 3)  # the collectives' own messages
        self._tags = itertools.count()

    def _mailbox_to_other_side(self, group_id: int) -> Mailbox:
        return Mailbox(_OtherSide(self.runtime, self.remote_ranks, group_id, self.group_name, self.timeout))

    def next_tag(self) -> int:
        """The tag of this rank's next collective: every rank of both sides counts the same calls alike."""
        return next(self._tags) % (C.TAG_UB + 1)

    def swap_with_other_leader(self, payload, tag: int) -> memoryview:
        """Leaders only: send `payload` to the other side's leader and return what it sent back."""
        sending = self.channel.send(0, tag, payload)
        receiving = self.channel.recv(0, tag)
        receiving.wait()
        sending.wait()
        return receiving.message.payload

    def shutdown(self) -> None:
        lane.close(self.local)
        self.local.shutdown()


class Intercomm(Comm):
    """A communicator between two disjoint groups: point-to-point ranks and collective roots name the other group."""

    def _build(self, comm: Comm | None = None) -> None:
        super()._build(comm)
        if self._group is not None and not isinstance(self._group, InterGroup):
            raise TypeError("expecting an intercommunicator, got an intracommunicator")

    # ----- identity

    def Get_remote_size(self) -> int:
        return self._g.remote_size

    remote_size = property(Get_remote_size)

    def Get_remote_group(self) -> Group:
        """The other side's members as an MPI.Group (this process is not one of them)."""
        g = self._g
        return Group._of(g.remote_ranks, g.runtime.rank)

    remote_group = property(Get_remote_group)

    # ----- creation

    def _split_by(self, color: int, key: int) -> "Intercomm":
        """Comm's Dup and Split, on both sides: the leaders swap their side's colours and keys."""
        g = self._g

        def split() -> Intercomm:
            tag = g.next_tag()
            return _pair_up(g.local, 0, color, key, lambda table: g.swap_with_other_leader(table, tag))

        return lane.lane(g).run(split)

    def Create(self, group: Group) -> "Intercomm":
        """Collective on both sides: each side's members of `group` (a subgroup of its local group, the same
        on all its ranks) form a new intercommunicator, ordered as in `group`; the others get COMM_NULL."""
        g = self._g
        if not isinstance(group, Group):
            raise TypeError(f"group must be an MPI.Group, got {type(group).__name__}")
        members = group._h.ranks  # raises for GROUP_NULL
        outside = [r for r in members if r not in g.local.ranks]
        if outside:
            raise err.Exception(err.ERR_GROUP, f"group has processes {outside} that are not in this side's group")
        me = g.runtime.rank
        return self._split_by(0, members.index(me)) if me in members else self._split_by(-1, 0)

    def Merge(self, high: bool = False) -> Intracomm:
        """One intracommunicator of both groups: the side that passed high=False first (ties: a fixed order)."""
        g = self._g

        def merge() -> Intracomm:
            tag = g.next_tag()
            mine, theirs = _swap_tables(g.local, 0, _row(g, int(bool(high)), 0),
                                        lambda table: g.swap_with_other_leader(table, tag))
            for table, side in ((mine, "this"), (theirs, "the remote")):
                if len(set(table[:, _COLOR])) > 1:
                    raise err.Exception(err.ERR_ARG, f"Merge: the ranks of {side} group passed different values "
                                                     "of high")
            mine_first = (mine[0, _COLOR], _lowest(mine)) < (theirs[0, _COLOR], _lowest(theirs))
            low, high_side = (mine, theirs) if mine_first else (theirs, mine)
            ranks = tuple(int(r) for r in np.concatenate([low[:, _GLOBAL_RANK], high_side[:, _GLOBAL_RANK]]))
            group_id = int(max(mine[:, _FREE_ID].max(), theirs[:, _FREE_ID].max()))
            g.runtime.reserve_group_id(group_id)
            return Intracomm._of(g.runtime.new_group(ranks, g.timeout, f"{g.group_name}/merged", group_id=group_id))

        return lane.lane(g).run(merge)


def _row(g, color: int, key: int) -> np.ndarray:
    return np.array([g.runtime.rank, color, key, g.runtime.unused_group_id()], dtype=np.int64)


def _lowest(table: np.ndarray) -> int:
    return int(table[:, _GLOBAL_RANK].min())


def _swap_tables(local, leader: int, row: np.ndarray, exchange) -> tuple[np.ndarray, np.ndarray]:
    """(this side's table, the other side's): one row per member, gathered here, swapped by the leaders.

    `exchange(table bytes)` runs on the leader and returns the other side's
    table bytes. Whatever goes wrong there is told to this side's other
    ranks, which would otherwise wait for the leader's broadcast until the
    timeout.
    """
    table = np.empty(local.size * row.size, dtype=np.int64)
    coll.all_gather_into_tensor(table, row, group=local)
    box: list = [None]
    failure = None
    if local.rank == leader:
        try:
            box[0] = np.frombuffer(bytes(exchange(table.tobytes())), dtype=np.int64)
        except Exception as exc:  # told to the other members below, then raised here
            failure = exc
            box[0] = (exc.Get_error_class() if isinstance(exc, err.Exception) else err.ERR_OTHER, str(exc))
    objects.broadcast_object_list(box, group_src=leader, group=local)
    if failure is not None:
        raise failure
    if isinstance(box[0], tuple):
        raise err.Exception(box[0][0], f"the local leader failed to reach the other group: {box[0][1]}")
    theirs = box[0].reshape(-1, row.size)
    mine = table.reshape(-1, row.size)
    shared = set(mine[:, _GLOBAL_RANK].tolist()) & set(theirs[:, _GLOBAL_RANK].tolist())
    if shared:
        raise err.Exception(err.ERR_COMM, f"the two groups of an intercommunicator must be disjoint; "
                                          f"global ranks {sorted(shared)} are in both")
    return mine, theirs


def _pair_up(local, leader: int, color: int, key: int, exchange) -> Intercomm:
    """Intercomms of the members of equal colour on both sides (ordered by key, then rank); COMM_NULL for the rest.

    Each colour present on both sides takes four consecutive fresh ids:
    the two sides' Groups (the side holding the lowest global rank first),
    then the two mailboxes.
    """
    mine, theirs = _swap_tables(local, leader, _row(local, color, key), exchange)
    rt = local.runtime
    base = int(max(mine[:, _FREE_ID].max(), theirs[:, _FREE_ID].max()))
    shared = sorted(set(mine[:, _COLOR].tolist()) & set(theirs[:, _COLOR].tolist()) - {-1})
    if shared:
        rt.reserve_group_id(base + _IDS_PER_INTERCOMM * len(shared) - 1)
    if color not in shared:
        return Intercomm()

    def members(table: np.ndarray) -> tuple[int, ...]:
        chosen = sorted((int(row[_KEY]), r) for r, row in enumerate(table) if row[_COLOR] == color)
        return tuple(int(table[r, _GLOBAL_RANK]) for _, r in chosen)

    local_ranks, remote_ranks = members(mine), members(theirs)
    first_id = base + _IDS_PER_INTERCOMM * shared.index(color)
    this_side = 0 if min(local_ranks) < min(remote_ranks) else 1
    group = rt.new_group(local_ranks, local.timeout, f"intercomm{first_id + 2}/local", group_id=first_id + this_side)
    return Intercomm._of(InterGroup(group, remote_ranks, first_id))


def _create_intercomm(self: Intracomm, local_leader: int, peer_comm: Comm, remote_leader: int,
                      tag: int = 0) -> Intercomm:
    """An intercomm between this communicator's ranks and another group's, whose leaders meet on peer_comm.

    Every rank of this communicator calls it; `peer_comm`, `remote_leader`
    and `tag` matter only at the local leader, which exchanges its side's
    members with the remote leader over `peer_comm` under `tag`.
    """
    g = self._g
    if isinstance(local_leader, bool) or not isinstance(local_leader, (int, np.integer)) \
            or not 0 <= local_leader < g.size:
        raise err.Exception(err.ERR_RANK, f"local_leader must be a rank in [0, {g.size}), got {local_leader!r}")

    def exchange(table: bytes) -> bytes:
        if not isinstance(peer_comm, Comm):
            raise TypeError(f"peer_comm must be a communicator, got {type(peer_comm).__name__}")
        peer = peer_comm._peer(remote_leader, "remote_leader")
        if peer == C.PROC_NULL:
            raise err.Exception(err.ERR_RANK, "remote_leader must be a rank of peer_comm, got PROC_NULL")
        return peer_comm.sendrecv(table, peer, tag, None, peer, tag)

    return lane.lane(g).run(lambda: _pair_up(g, int(local_leader), 0, g.rank, exchange))


Intracomm.Create_intercomm = _create_intercomm

# Create_from_groups' messages go over the job's world group, below the tags Create_group and users take.
_FROM_GROUPS_TAG_BASE = -(2**41)


def _create_from_groups(cls, local_group: Group, local_leader: int, remote_group: Group, remote_leader: int,
                        stringtag: str = "org.mpi4py", info=None, errhandler=None) -> Intercomm:
    """An intercomm between two groups with no parent communicator: every member of both calls it.

    The members meet through the job's world group: each sends its free
    group id to its leader, the leaders swap their side's highest under
    a tag made from `stringtag`, and send the higher back to their side.
    """
    for group, name in ((local_group, "local_group"), (remote_group, "remote_group")):
        if not isinstance(group, Group):
            raise TypeError(f"{name} must be an MPI.Group, got {type(group).__name__}")
    if not isinstance(stringtag, str):
        raise TypeError(f"stringtag must be a str, got {type(stringtag).__name__}")
    here, there = local_group._h.ranks, remote_group._h.ranks
    for leader, ranks, name in ((local_leader, here, "local_leader"), (remote_leader, there, "remote_leader")):
        if isinstance(leader, bool) or not isinstance(leader, (int, np.integer)) or not 0 <= leader < len(ranks):
            raise err.Exception(err.ERR_RANK, f"{name} must be a rank in [0, {len(ranks)}), got {leader!r}")
    rt = world.runtime()
    if rt.rank not in here:
        raise err.Exception(err.ERR_GROUP, "Create_from_groups: this process is not a member of local_group")
    if set(here) & set(there):
        raise err.Exception(err.ERR_GROUP, f"local_group and remote_group must be disjoint; global ranks "
                                           f"{sorted(set(here) & set(there))} are in both")
    base = _agree_through_world(rt, here[local_leader], here, there[remote_leader],
                                _FROM_GROUPS_TAG_BASE - zlib.crc32(stringtag.encode()))
    rt.reserve_group_id(base + _IDS_PER_INTERCOMM - 1)
    this_side = 0 if min(here) < min(there) else 1
    group = rt.new_group(here, rt.timeout, f"intercomm{base + 2}/local", group_id=base + this_side)
    return Intercomm._of(InterGroup(group, there, base))


def _agree_through_world(rt, leader: int, members: tuple[int, ...], remote_leader: int, tag: int) -> int:
    """The highest free group id of both sides' members: gathered by each leader, swapped, sent back."""
    w = rt.world

    def send(global_rank: int, value: int):
        return w.isend(w.group_rank(global_rank), memoryview(np.array([value], dtype=np.int64)).cast("B"), tag)

    def receive(global_rank: int) -> tuple[object, np.ndarray]:
        box = np.empty(1, dtype=np.int64)
        return w.irecv(w.group_rank(global_rank), memoryview(box).cast("B"), tag), box

    mine = rt.unused_group_id()
    if rt.rank != leader:
        sending, (receiving, box) = send(leader, mine), receive(leader)
        sending.wait()
        receiving.wait()
        return int(box[0])
    others = [receive(r) for r in members if r != leader]
    for work, _ in others:
        work.wait()
    side_highest = max([mine] + [int(box[0]) for _, box in others])
    sending, (receiving, box) = send(remote_leader, side_highest), receive(remote_leader)
    sending.wait()
    receiving.wait()
    base = max(side_highest, int(box[0]))
    for work in [send(r, base) for r in members if r != leader]:
        work.wait()
    return base


Intercomm.Create_from_groups = classmethod(_create_from_groups)


"""MPI.Group: an ordered set of processes, and the communicators made from one (Comm.Create, Create_group).

A Group is local: its operations (Union, Incl, Translate_ranks, ...) are
plain arithmetic on a tuple of the job's global ranks and never talk to
other ranks. Copies made with MPI.Group(group) share one handle, so they
compare equal and the constants pickle back to themselves, as in mpi4py.
"""

from __future__ import annotations

import itertools
import weakref
import zlib

import numpy as np

from meshcomm.api import collectives as coll
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi.comm import Comm, Intracomm
from meshcomm.mpi.handles import NamesState


_handles: "weakref.WeakValueDictionary[int, _Handle]" = weakref.WeakValueDictionary()
_handle_numbers = itertools.count(1)  # 0 names GROUP_NULL


class _Handle:
    """What equal groups share: the members (global ranks, in group order) and this process's global rank."""

    def __init__(self, ranks: tuple[int, ...], me: int | None) -> None:
        self.ranks, self.me = ranks, me
        self.number = next(_handle_numbers)
        _handles[self.number] = self


class Group(NamesState):
    """An ordered set of processes; GROUP_NULL when it has no handle."""

    _names = "_handle"

    def _build(self, group: "Group | None" = None) -> None:
        if group is not None and not isinstance(group, Group):
            raise TypeError(f"MPI.Group() copies a Group, got {type(group).__name__}")
        self._handle = None if group is None else group._handle
        self._constant = ""

    @classmethod
    def _of(cls, ranks, me: int | None) -> "Group":
        ranks = tuple(int(r) for r in ranks)
        if not ranks:
            return cls(GROUP_EMPTY)
        group = cls()
        group._handle = _Handle(ranks, me)
        return group

    @property
    def _h(self) -> _Handle:
        if self._handle is None:
            raise err.Exception(err.ERR_GROUP, "this is GROUP_NULL (or a freed group)")
        return self._handle

    # ----- identity

    def Get_size(self) -> int:
        return len(self._h.ranks)

    def Get_rank(self) -> int:
        """This process's rank in the group, UNDEFINED when it is not a member."""
        h = self._h
        return h.ranks.index(h.me) if h.me in h.ranks else C.UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def __repr__(self) -> str:
        if self._handle is None:
            return "<meshcomm.MPI.Group GROUP_NULL>"
        return f"<meshcomm.MPI.Group ranks={list(self._handle.ranks)}>"

    def __reduce__(self):
        """The constants unpickle to themselves, copies of them to equal copies; real groups are local."""
        if self._constant:
            return self._constant
        if self._handle is None:
            return type(self), (GROUP_NULL,)
        if self._handle is GROUP_EMPTY._handle:
            return type(self), (GROUP_EMPTY,)
        raise ValueError("an MPI.Group names processes of this job only and cannot be pickled")

    # ----- handles: the number naming the group in this process

    @property
    def handle(self) -> int:
        return 0 if self._handle is None else self._handle.number

    @classmethod
    def fromhandle(cls, handle: int) -> "Group":
        group = cls()
        if handle != 0:
            group._handle = _handles.get(int(handle))
            if group._handle is None:
                raise ValueError(f"no group has handle {handle}")
        return group

    def toint(self) -> int:
        return self.handle

    py2f = toint
    fromint = f2py = fromhandle

    # ----- comparing and translating

    def Compare(self, group: "Group") -> int:
        """IDENT: same members in the same order; SIMILAR: same members; else UNEQUAL."""
        mine, theirs = self._h.ranks, _checked(group, "group")._h.ranks
        if mine == theirs:
            return C.IDENT
        if sorted(mine) == sorted(theirs):
            return C.SIMILAR
        return C.UNEQUAL

    def Translate_ranks(self, ranks=None, group: "Group | None" = None) -> list[int]:
        """The ranks in `group` (default: COMM_WORLD's group) of `ranks` of this group (default: all)."""
        mine = self._h.ranks
        targets = _world_ranks() if group is None else _checked(group, "group")._h.ranks
        ranks = range(len(mine)) if ranks is None else list(ranks)
        result = []
        for rank in ranks:
            if rank == C.PROC_NULL:
                result.append(C.PROC_NULL)
                continue
            _check_rank(rank, len(mine), "ranks")
            member = mine[rank]
            result.append(targets.index(member) if member in targets else C.UNDEFINED)
        return result

    # ----- new groups

    @classmethod
    def Create_from_session_pset(cls, session, pset_name: str) -> "Group":
        """The group of a session's process set: the same as session.Create_group(pset_name)."""
        from meshcomm.mpi.session import Session

        if not isinstance(session, Session):
            raise TypeError(f"session must be an MPI.Session, got {type(session).__name__}")
        return cls(session.Create_group(pset_name))

    def Dup(self) -> "Group":
        return Group._of(self._h.ranks, self._h.me)

    def Union(self, group: "Group") -> "Group":
        """This group's members, then those of `group` not in it, each in their own group's order."""
        a, b = self._h, _checked(group, "group")._h
        return Group._of(a.ranks + tuple(r for r in b.ranks if r not in a.ranks), _me(a, b))

    def Intersection(self, group: "Group") -> "Group":
        a, b = self._h, _checked(group, "group")._h
        return Group._of(tuple(r for r in a.ranks if r in b.ranks), _me(a, b))

    Intersect = Intersection

    def Difference(self, group: "Group") -> "Group":
        a, b = self._h, _checked(group, "group")._h
        return Group._of(tuple(r for r in a.ranks if r not in b.ranks), _me(a, b))

    def Incl(self, ranks) -> "Group":
        """The members at `ranks`, in that order."""
        h = self._h
        return Group._of(tuple(h.ranks[r] for r in _distinct(ranks, len(h.ranks))), h.me)

    def Excl(self, ranks) -> "Group":
        h = self._h
        dropped = set(_distinct(ranks, len(h.ranks)))
        return Group._of(tuple(m for r, m in enumerate(h.ranks) if r not in dropped), h.me)

    def Range_incl(self, ranks) -> "Group":
        """Incl of the ranks the (first, last, stride) triplets list."""
        return self.Incl(_expand_ranges(ranks, len(self._h.ranks)))

    def Range_excl(self, ranks) -> "Group":
        return self.Excl(_expand_ranges(ranks, len(self._h.ranks)))

    def Free(self) -> None:
        if self._constant:
            raise err.Exception(err.ERR_GROUP, f"cannot free the predefined group {self._constant}")
        self._h  # raises for GROUP_NULL: there is nothing to free
        self._handle = None

    # mpi4py's lowercase spellings of the same operations
    union, intersection, difference = Union, Intersection, Difference


def _constant(name: str, handle: _Handle | None) -> Group:
    group = Group()
    group._handle, group._constant = handle, name
    return group


GROUP_NULL = _constant("GROUP_NULL", None)
GROUP_EMPTY = _constant("GROUP_EMPTY", _Handle((), None))


def _checked(group, name: str) -> Group:
    if not isinstance(group, Group):
        raise TypeError(f"{name} must be an MPI.Group, got {type(group).__name__}")
    group._h  # raises for GROUP_NULL
    return group


def _me(a: _Handle, b: _Handle) -> int | None:
    return a.me if a.me is not None else b.me


def _check_rank(rank, size: int, name: str) -> int:
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"{name} must hold int ranks, got {type(rank).__name__}")
    if not 0 <= rank < size:
        raise err.Exception(err.ERR_RANK, f"{name}: rank {rank} is not in [0, {size})")
    return int(rank)


def _distinct(ranks, size: int) -> list[int]:
    checked = [_check_rank(r, size, "ranks") for r in ranks]
    if len(set(checked)) != len(checked):
        raise err.Exception(err.ERR_RANK, f"ranks must be distinct, got {checked}")
    return checked


def _expand_ranges(ranges, size: int) -> list[int]:
    ranks = []
    for triplet in ranges:
        first, last, stride = (int(x) for x in triplet)
        if stride == 0:
            raise err.Exception(err.ERR_ARG, f"range {tuple(triplet)} has stride 0")
        for value in (first, last):
            _check_rank(value, size, "ranges")
        ranks.extend(range(first, last + (1 if stride > 0 else -1), stride))
    return ranks


def _world_ranks() -> tuple[int, ...]:
    from meshcomm.mpi import world

    return world.runtime().world.ranks


# ----- communicators and groups


def _get_group(self) -> Group:
    g = self._g
    return Group._of(g.ranks, g.runtime.rank)


def _create(self, group: Group) -> Intracomm:
    """Collective over this communicator: the members of `group` get a communicator over it, others COMM_NULL."""
    g = self._g
    members = _checked(group, "group")._h.ranks
    outside = [r for r in members if r not in g.ranks]
    if outside:
        raise err.Exception(err.ERR_GROUP, f"group has processes {outside} that are not in this communicator")
    return lane.lane(g).run(lambda: _create_now(g, members))


def _create_now(g, members: tuple[int, ...]) -> Intracomm:
    rt = g.runtime
    fingerprint = zlib.crc32(np.asarray(members, dtype=np.int64).tobytes())
    mine = np.array([fingerprint, rt.unused_group_id()], dtype=np.int64)
    table = np.empty(2 * g.size, dtype=np.int64)
    coll.all_gather_into_tensor(table, mine, group=g)
    rows = table.reshape(g.size, 2)
    if len(set(rows[:, 0].tolist())) != 1:
        raise err.Exception(err.ERR_GROUP, "Create needs the same group on every rank of the communicator")
    if not members:
        return Intracomm()
    group_id = int(rows[:, 1].max())
    rt.reserve_group_id(group_id)
    if rt.rank not in members:
        return Intracomm()
    return Intracomm._of(rt.new_group(members, g.timeout, f"{g.group_name}/create", group_id=group_id))


# Create_group's own messages: below every tag user point-to-point or neighbourhood collectives use.
_CREATE_GROUP_TAG_BASE = -(2**40)


def _create_group(self, group: Group, tag: int = 0) -> Intracomm:
    """Collective over the members of `group` only: they agree on a fresh group id among themselves."""
    g = self._g
    members = _checked(group, "group")._h.ranks
    tag = self._tag(tag)
    outside = [r for r in members if r not in g.ranks]
    if outside:
        raise err.Exception(err.ERR_GROUP, f"group has processes {outside} that are not in this communicator")
    rt = g.runtime
    if rt.rank not in members:
        return Intracomm()
    return lane.lane(g).run(lambda: _create_group_now(g, members, _CREATE_GROUP_TAG_BASE + tag))


def _create_group_now(g, members: tuple[int, ...], tag: int) -> Intracomm:
    """The first member gathers every member's unused group id and sends back the highest."""
    rt = g.runtime
    peers = [g.group_rank(r) for r in members]
    mine = np.array([rt.unused_group_id()], dtype=np.int64)
    if peers[0] == g.rank:
        ids = [np.empty(1, dtype=np.int64) for _ in peers[1:]]
        receives = [g.irecv(p, memoryview(box).cast("B"), tag) for p, box in zip(peers[1:], ids)]
        for work in receives:
            work.wait()
        agreed = np.array([max([int(mine[0])] + [int(box[0]) for box in ids])], dtype=np.int64)
        sends = [g.isend(p, memoryview(agreed).cast("B"), tag) for p in peers[1:]]
        for work in sends:
            work.wait()
    else:
        g.isend(peers[0], memoryview(mine).cast("B"), tag).wait()
        agreed = np.empty(1, dtype=np.int64)
        g.irecv(peers[0], memoryview(agreed).cast("B"), tag).wait()
    group_id = int(agreed[0])
    rt.reserve_group_id(group_id)
    return Intracomm._of(rt.new_group(members, g.timeout, f"{g.group_name}/group", group_id=group_id))


Comm.Get_group = _get_group
Comm.group = property(_get_group)
Intracomm.Create = _create
Intracomm.Create_group = _create_group

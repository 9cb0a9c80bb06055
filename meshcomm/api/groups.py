"""Sub-groups: new_group, new_subgroups, split by colour, and rank translation.

Like torch.distributed, every rank of the world calls a group-creating
function in the same order, members or not: the group ids then agree on
every rank without a message.
"""

from __future__ import annotations

import numpy as np

from meshcomm.api import state
from meshcomm.api.init import _seconds


def _check_ranks(ranks, world_size: int, name: str = "ranks") -> tuple[int, ...]:
    try:
        values = [int(r) for r in ranks]
    except TypeError:
        raise TypeError(f"{name} must be a list of ints, got {type(ranks).__name__}") from None
    bad = [r for r in values if not 0 <= r < world_size]
    if bad:
        raise ValueError(f"{name} must be global ranks in [0, {world_size}), got {bad}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a rank, got {values}")
    return tuple(values)


def _timeout(timeout):
    return None if timeout is None else _seconds(timeout)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of `ranks` (all ranks when None), in rank order as torch makes it; outsiders get
    GroupMember.NON_GROUP_MEMBER."""
    rt = state.runtime()
    members = tuple(range(rt.world_size)) if ranks is None else tuple(sorted(_check_ranks(ranks, rt.world_size)))
    group = rt.new_group(members, _timeout(timeout), group_desc)
    return group if group.rank >= 0 else state.GroupMember.NON_GROUP_MEMBER


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    """One group per list of ranks (each in rank order, as torch makes them); returns (this rank's group or None,
    all groups)."""
    if not ranks_per_subgroup_list:
        raise ValueError("ranks_per_subgroup_list must not be empty")
    rt = state.runtime()
    seen: set[int] = set()
    groups, mine = [], None
    for index, ranks in enumerate(ranks_per_subgroup_list):
        members = tuple(sorted(_check_ranks(ranks, rt.world_size, f"ranks_per_subgroup_list[{index}]")))
        overlap = seen.intersection(members)
        if overlap:
            raise ValueError(f"rank(s) {sorted(overlap)} appear in more than one subgroup")
        seen.update(members)
        group = rt.new_group(members, _timeout(timeout), f"{group_desc or 'subgroup'}_{index}")
        groups.append(group)
        if group.rank >= 0:
            mine = group
    return mine, groups


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Cut the world into consecutive groups of `group_size` ranks."""
    rt = state.runtime()
    if group is not None:
        raise ValueError("new_subgroups(group=...) is not supported; subgroups are cut from the world")
    if group_size is None:
        # torch counts GPUs per machine here; a CPU job has nothing to count.
        raise ValueError("group_size is required: meshcomm has no devices to count")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rt.world_size % group_size:
        raise ValueError(f"group_size ({group_size}) must divide the world size ({rt.world_size})")
    lists = [list(range(start, start + group_size)) for start in range(0, rt.world_size, group_size)]
    return new_subgroups_by_enumeration(lists, timeout, group_desc=group_desc)


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None):
    """torch's split_group: disjoint lists of global ranks of the parent; returns this rank's group or None."""
    parent = state.resolve_group(parent_pg, member=False)
    if split_ranks is None:
        raise ValueError("split_ranks is required: a list of lists of global ranks")
    for index, ranks in enumerate(split_ranks):
        outside = [r for r in ranks if r not in parent.ranks]
        if outside:
            raise ValueError(f"split_ranks[{index}] has ranks {outside} outside the parent group {list(parent.ranks)}")
    mine, _ = new_subgroups_by_enumeration(split_ranks, timeout, group_desc=group_desc)
    return mine


def split(color: int | None, key: int = 0, group=None, timeout=None):
    """MPI_Comm_split: ranks with the same colour form a group, ordered by (key, old rank).

    A rank passing color=None joins no group and gets None. Every rank of
    `group` must call this.
    """
    from meshcomm.api.collectives import all_gather_into_tensor

    parent = state.resolve_group(group)
    for value, name in ((color, "color"), (key, "key")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if color is not None and color < 0:
        raise ValueError(f"color must be >= 0 or None, got {color}")
    mine = np.array([-1 if color is None else color, key], dtype=np.int64)
    table = np.empty(2 * parent.size, dtype=np.int64)
    all_gather_into_tensor(table, mine, group=parent, timeout=timeout)
    pairs = table.reshape(parent.size, 2)
    colors = sorted({int(c) for c in pairs[:, 0] if c >= 0})
    rt = state.runtime()
    result = None
    # Every rank creates every colour's group in the same order so ids agree.
    for c in colors:
        members = sorted((int(pairs[r, 1]), r) for r in range(parent.size) if pairs[r, 0] == c)
        ranks = tuple(parent.ranks[r] for _, r in members)
        created = rt.new_group(ranks, _timeout(timeout), f"{parent.group_name}/split{c}")
        if c == color:
            result = created
    return result


def get_group_rank(group, global_rank: int) -> int:
    g = state.resolve_group(group, member=False)
    if global_rank not in g.ranks:
        raise ValueError(f"global_rank {global_rank} is not in group {g.group_name!r} (ranks {list(g.ranks)})")
    return g.group_rank(global_rank)


def get_global_rank(group, group_rank: int) -> int:
    g = state.resolve_group(group, member=False)
    if not 0 <= group_rank < g.size:
        raise ValueError(f"group_rank must be in [0, {g.size}), got {group_rank}")
    return g.global_rank(group_rank)


def get_process_group_ranks(group) -> list[int]:
    return list(state.resolve_group(group, member=False).ranks)

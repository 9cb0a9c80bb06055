"""The process's one runtime, and how API calls find their group."""

from __future__ import annotations

import warnings

import meshcomm.group as group_package
from meshcomm.group.group import Group
from meshcomm.group.runtime import Runtime

_runtime: Runtime | None = None


class GroupMember:
    """torch's sentinels: WORLD means the default group; NON_GROUP_MEMBER is what new_group gives outsiders."""

    WORLD = group_package.WORLD
    NON_GROUP_MEMBER = group_package.NON_GROUP_MEMBER


def set_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


def runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("meshcomm is not initialized: call meshcomm.init_process_group() first")
    return _runtime


def is_initialized() -> bool:
    return _runtime is not None


_NO_LANES: dict = {}


def lanes_of(group) -> dict:
    """The lanes of `group` (None: the world) for the faces' repeated calls (group/lanes.py); empty when it has
    none to offer, and the call takes the whole path, checks included."""
    if group is None:
        return _runtime.world.lanes if _runtime is not None else _NO_LANES
    return group.lanes if type(group) is Group else _NO_LANES


def resolve_group(group, member: bool = True, op: str | None = None) -> Group | None:
    """The Group for `group` (None = world); ValueError if this rank is outside it.

    With `op` (the name of a torch-face call), a rank outside the group gets
    torch's warning and None instead, and the call does nothing: tutorial code
    runs every rank through calls on groups some ranks are not in, as torch
    allows."""
    if group is None:
        return runtime().world
    if group is GroupMember.NON_GROUP_MEMBER:
        if op is not None:
            return _not_in_group(op, runtime().rank)
        raise ValueError(f"rank {runtime().rank} is not a member of this group (new_group returned NON_GROUP_MEMBER)")
    if not isinstance(group, Group):
        raise TypeError(f"group must be a group from new_group()/split_group() or None, got {type(group).__name__}")
    # A group carries its own runtime: the torch backend's groups work without
    # meshcomm.init_process_group. Closing a runtime destroys all its groups.
    if group.destroyed:
        raise ValueError(f"group {group.group_name!r} was destroyed")
    if member and group.rank < 0:
        if op is not None:
            return _not_in_group(op, group.runtime.rank)
        raise ValueError(
            f"rank {group.runtime.rank} is not in group {group.group_name!r} (ranks {list(group.ranks)})"
        )
    return group


def _not_in_group(op: str, rank: int) -> None:
    warnings.warn(f"Running {op} on global rank {rank} which does not belong to the given group.", stacklevel=3)


def group_peer(group: Group, global_rank, group_rank, role: str) -> int:
    """Translate torch's (src|dst, group_src|group_dst) pair into a rank within `group`."""
    if global_rank is not None and group_rank is not None:
        raise ValueError(f"give either {role} or group_{role}, not both ({global_rank} and {group_rank})")
    if group_rank is not None:
        _check_int(group_rank, f"group_{role}")
        if not 0 <= group_rank < group.size:
            raise ValueError(f"group_{role} must be in [0, {group.size}), got {group_rank}")
        return group_rank
    if global_rank is None:
        raise ValueError(f"{role} is required")
    _check_int(global_rank, role)
    if global_rank not in group.ranks:
        raise ValueError(
            f"{role} must be a rank of group {group.group_name!r} (global ranks {list(group.ranks)}), got {global_rank}"
        )
    return group.group_rank(global_rank)


def _check_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import operator

            operator.index(value)
            return
        except TypeError:
            raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None

"""Surviving a lost rank: shrink, agree and revoke (ULFM's calls), on the torch-style face.

    try:
        dist.all_reduce(x)
    except dist.PeerLostError:
        dist.shrink()          # the survivors, renumbered 0..n-1, become the default group
        ...                    # carry on with dist.get_world_size() ranks

docs/failures.md ("Carrying on after a lost rank") explains what each call promises.
"""

from __future__ import annotations

from meshcomm.api import state
from meshcomm.group import survival
from meshcomm.group.call import seconds
from meshcomm.group.group import Group


def shrink(group=None, timeout=None) -> Group:
    """A new group of `group`'s members still alive (the world when None), agreed by all of them.

    Shrinking the world makes the survivors' group the default one: get_rank(), get_world_size() and calls
    without a group use it, and the old world's groups are destroyed."""
    g = state.resolve_group(group)
    survivors = survival.shrink(g, None if timeout is None else seconds(timeout))
    if g is state.runtime().world:
        state.set_runtime(survivors.runtime)
    return survivors


def agree(flag: bool, group=None, timeout=None) -> bool:
    """The AND of `flag` over `group`'s live members; all of them get the same answer, even if one dies during
    the call. failed_ranks(group) then lists the members found gone."""
    if not isinstance(flag, (bool, int)):
        raise TypeError(f"flag must be a bool, got {type(flag).__name__}")
    return bool(survival.agree(state.resolve_group(group), int(bool(flag)),
                               None if timeout is None else seconds(timeout)))


def revoke(group=None, reason: str = "") -> None:
    """Make every pending and later call on `group` raise RevokedError, on every member."""
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a str, got {type(reason).__name__}")
    survival.revoke(state.resolve_group(group), reason)


def is_revoked(group=None) -> bool:
    return survival.is_revoked(state.resolve_group(group))


def failed_ranks(group=None) -> list[int]:
    """The members of `group` (global ranks) whose processes are gone."""
    return list(survival.failed_ranks(state.resolve_group(group)))

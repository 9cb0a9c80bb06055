"""Carrying on after a lost rank: revoke a group, agree on a flag, shrink a group to its survivors (ULFM's calls).

A group that lost a member is not repaired in place: its connections were
torn down and its board holds the lost member's half-finished posts. shrink()
agrees on the survivors (rendezvous/agreement.py, over the processes'
lifelines) and builds them a new runtime: new connections, a new board, and a
store served by the lowest survivor's lifeline. No message of the old group
can reach the new one, which shares none of its connections. docs/failures.md
tells the whole story.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from meshcomm.errors import AuthenticationError, CommTimeoutError, PeerLostError, RendezvousError, RevokedError
from meshcomm.group.group import Group
from meshcomm.group.runtime import Runtime
from meshcomm.rendezvous import agreement, lifeline
from meshcomm.rendezvous.tcp_store import TCPStore

_PROBE_SECONDS = 1.0  # how long failed_ranks waits for a member's lifeline to answer before calling it alive


def revoke(group: Group, reason: str = "") -> None:
    """Make every pending and later call of `group` raise RevokedError, here and on every other member."""
    runtime = group.runtime
    runtime.transport.revoke([r for r in group.ranks if r != runtime.rank], group.group_id, reason)


def is_revoked(group: Group) -> bool:
    return group.group_id in group.runtime.transport.revoked_groups


def agree(group: Group, flag: int, timeout: float | None = None) -> int:
    """The bitwise AND of `flag` over the members still alive; every live member gets the same answer, and a
    member that dies meanwhile is left out. The failed members are then in group.failed."""
    return agreement_of(group, flag, timeout)()


def agreement_of(group: Group, flag: int, timeout: float | None = None) -> Callable[[], int]:
    """agree(), to be run later (on another thread: Iagree): its place among the group's agreements, which every
    member numbers in call order, is taken now."""
    topic, deadline = group.runtime.agreement_topic(group, "agree"), _deadline(group, timeout)

    def run() -> int:
        decision = _agree(group, topic, flag, deadline)
        group.failed = tuple(group.ranks[m] for m in decision.gone)
        return decision.flag

    return run


def failed_ranks(group: Group) -> tuple[int, ...]:
    """The members (global ranks) whose process is gone now: their lifelines refuse connections."""
    runtime = group.runtime
    addresses = _lifelines(runtime)
    return tuple(r for r in group.ranks
                 if r != runtime.rank and lifeline.is_gone(addresses[r], runtime.token, _PROBE_SECONDS))


def shrink(group: Group, timeout: float | None = None, replace: bool = True) -> Group:
    """A new group of the members still alive, in their old order; every survivor gets the same one.

    With `replace`, the new group replaces `group`: the members' later calls
    on `group` raise RevokedError, and shrinking a runtime's world retires
    that runtime (its other groups with it). Without it (MPI's Shrink), the
    old group stays as it was."""
    runtime = group.runtime
    deadline = _deadline(group, timeout)
    topic = runtime.agreement_topic(group, "shrink")
    attempt = 0
    while True:
        decision = _agree(group, f"{topic}/{attempt}", 1, deadline)
        if group.rank not in decision.alive:
            raise PeerLostError(f"rank {runtime.rank}: the other survivors of group {group.group_name!r} found this "
                                "rank gone (its lifeline did not answer in time) and went on without it", runtime.rank)
        try:
            survivors = _build(group, decision, f"{topic}/{attempt}", deadline)
            break
        except (PeerLostError, RendezvousError) as exc:
            # A survivor died while the new group was built, or the coordinator did: agree again, without it.
            if time.monotonic() >= deadline:
                raise CommTimeoutError(f"shrink of group {group.group_name!r}: no group of survivors could be "
                                       f"built before the deadline; last: {exc}") from exc
            attempt += 1
    group.failed = tuple(group.ranks[m] for m in decision.gone)
    if not replace:
        return survivors
    revoke(group, "replaced by shrink()")
    if group is runtime.world:
        runtime.retire(RevokedError(f"rank {runtime.rank}: this group was shrunk; use the group shrink() returned"))
    return survivors


def _agree(group: Group, topic: str, flag: int, deadline: float) -> agreement.Decision:
    runtime = group.runtime
    if group.rank < 0:
        raise ValueError(f"rank {runtime.rank} is not in group {group.group_name!r} (ranks {list(group.ranks)})")
    addresses = _lifelines(runtime)
    # A host found silent (one of its ranks' connections timed out) is silent for all its ranks.
    hosts = runtime.transport.host_of
    cut_off = {hosts[r] for r in runtime.transport.silent_peers()}
    silent = frozenset(m for m, r in enumerate(group.ranks) if hosts[r] in cut_off and r != runtime.rank)
    return agreement.agree(topic, group.rank, range(group.size), [addresses[r] for r in group.ranks], runtime.token,
                           flag, deadline, runtime.lifeline, silent)


def _build(group: Group, decision: agreement.Decision, topic: str, deadline: float) -> Group:
    """The survivors' runtime, its store served by the coordinator's lifeline; returns its world group."""
    runtime = group.runtime
    addresses = _lifelines(runtime)
    members = [group.ranks[m] for m in decision.alive]
    lifelines = [addresses[r] for r in members]
    coordinator = group.ranks[decision.coordinator]
    host, port = addresses[coordinator].rsplit(":", 1)
    try:
        client = TCPStore(host, int(port), timeout=max(deadline - time.monotonic(), 0.1), token=runtime.token,
                          wait_for_server=False)
    except AuthenticationError as exc:
        # The survivors share one token: a handshake that fails is the coordinator exiting, as lifeline.connect
        # reads it, and shrink() agrees again without it.
        raise PeerLostError(f"rank {runtime.rank}: the survivors' coordinator, rank {coordinator}, went during the "
                            f"handshake: {exc}", coordinator) from exc
    new_rank = members.index(runtime.rank)
    store = lifeline.SurvivorStore(f"survivors/{topic}", client, new_rank, lifelines, runtime.token,
                                   serving=decision.coordinator == group.rank)
    try:
        successor = Runtime(new_rank, len(members), store, group.timeout, host, runtime.backend, runtime.token,
                            lifelines=lifelines, lineage=f"{runtime.lineage}.{topic}")
    except BaseException:
        client.close()
        raise
    return successor.world


def _lifelines(runtime) -> list[str]:
    if runtime.joins_jobs:
        raise RendezvousError(f"rank {runtime.rank}: this group joins processes of separate jobs (Accept, Connect, "
                              "Spawn), whose lifelines answer their own jobs only, so it cannot agree or shrink")
    if runtime.lifelines is None:
        raise RendezvousError(f"rank {runtime.rank}: the members' lifelines are unknown (the store left before this "
                              "rank read them), so its groups cannot agree or shrink")
    return runtime.lifelines


def _deadline(group: Group, timeout: float | None) -> float:
    return time.monotonic() + (group.timeout if timeout is None else timeout)


"""Fault-tolerant agreement among a group's live members, over their lifelines (lifeline.py).

The coordinator is the lowest member whose lifeline answers. Every other
member writes its join (with its flag) into the coordinator's lifeline and
waits there for the decision. The coordinator waits until every member has
joined or is gone, then records the decision in its lifeline: who is left,
who is gone, and the bitwise AND of the flags (integers) of those left.
Every member records the decision in its own lifeline before it returns. If
the coordinator dies before everyone has read it, the next lowest member
coordinates, and adopts a decision that any member has recorded, so every
member returns the same one. docs/failures.md has the argument and its limits.
"""

from __future__ import annotations

import functools
import json
import operator
import threading
import time
from dataclasses import dataclass
from collections.abc import Sequence

from meshcomm.errors import CommTimeoutError, PeerLostError
from meshcomm.rendezvous import lifeline
from meshcomm.rendezvous.tcp_store import TCPStore

_LOOK_EVERY = 0.005  # seconds between a waiting coordinator's looks at the members it lacks


@dataclass(frozen=True)
class Decision:
    """What the live members agreed on. Ranks are the members' indices into the address list."""

    alive: tuple[int, ...]
    gone: tuple[int, ...]
    flag: int  # the bitwise AND of the flags of those alive
    coordinator: int  # its lifeline serves the store of a group built from `alive`

    def to_bytes(self) -> bytes:
        return json.dumps({"alive": self.alive, "gone": self.gone, "flag": self.flag,
                           "coordinator": self.coordinator}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Decision":
        d = json.loads(data)
        return cls(tuple(d["alive"]), tuple(d["gone"]), int(d["flag"]), int(d["coordinator"]))


def agree(topic: str, me: int, members: Sequence[int], addresses: Sequence[str], token: bytes, flag: int,
          deadline: float, mine: lifeline.Lifeline, silent: frozenset[int] = frozenset()) -> Decision:
    """Agree with the live members on `topic` (unique per call); every member must call it.

    `addresses[r]` is member r's lifeline; `mine` is this process's. `silent` are members whose host this
    process already found silent (the transport's keepalive gave up): they get a last look, not a full wait. Raises
    CommTimeoutError, naming the members that neither joined nor left, when
    `deadline` (time.monotonic()) passes."""
    gone: set[int] = set()
    while True:
        coordinator = min(m for m in members if m not in gone)
        if coordinator == me:
            decision = _coordinate(topic, me, members, addresses, token, flag, deadline, mine, gone, silent)
            break
        client = _reach(coordinator, addresses, token, _left(deadline, topic, [coordinator]), silent)
        if client is None:
            gone.add(coordinator)
            continue
        try:
            client.set(f"{topic}/join/{me}", str(int(flag)).encode())
            # `decided`: the coordinator's decision, or one it took from an earlier coordinator before it became one.
            decision = Decision.from_bytes(_await(client, f"{topic}/decided", deadline, topic, coordinator))
            break
        except PeerLostError:
            gone.add(coordinator)  # it died while we waited: the next lowest coordinates
        finally:
            client.close()
    mine.record(f"{topic}/decided", decision.to_bytes())
    return decision


def _coordinate(topic: str, me: int, members: Sequence[int], addresses: Sequence[str], token: bytes, flag: int,
                deadline: float, mine: lifeline.Lifeline, gone: set[int], silent: frozenset[int]) -> Decision:
    flags = {me: int(flag)}
    waiting = [m for m in members if m != me and m not in gone]
    probes: dict[int, TCPStore | None] = {}
    adopted: Decision | None = None
    try:
        while waiting and adopted is None:
            for m in [m for m in waiting if mine.own.check([f"{topic}/join/{m}"])]:
                flags[m] = int(mine.own.get(f"{topic}/join/{m}"))
                waiting.remove(m)
            # Not joined yet: gone, or it returned with an earlier coordinator's decision. Silent hosts cost a
            # wait each, so the members not yet reached are reached all at once.
            probes.update(_connect_all([m for m in waiting if m not in probes], addresses, token,
                                       _left(deadline, topic, waiting), silent))
            for m in list(waiting):
                probe = probes[m]
                try:
                    if probe is not None and probe.check([f"{topic}/decided"]):
                        adopted = Decision.from_bytes(probe.get(f"{topic}/decided"))
                        break
                except PeerLostError:
                    probe = None  # gone while we looked (its client is closed with the others, below)
                if probe is None:
                    gone.add(m)
                    waiting.remove(m)
            if waiting and adopted is None:
                _left(deadline, topic, waiting)
                time.sleep(_LOOK_EVERY)
    finally:
        for probe in probes.values():
            if probe is not None:
                probe.close()
    return adopted or Decision(tuple(sorted(flags)), tuple(sorted(gone)), functools.reduce(operator.and_,
                                                                                              flags.values()), me)


def _connect_all(members: Sequence[int], addresses: Sequence[str], token: bytes, timeout: float,
                 silent: frozenset[int]) -> dict[int, TCPStore | None]:
    """A lifeline client of each member (None for one that is gone), connected in parallel."""
    found: dict[int, TCPStore | None] = {}

    def reach(m: int) -> None:
        found[m] = _reach(m, addresses, token, timeout, silent)

    threads = [threading.Thread(target=reach, args=(m,), daemon=True) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def _reach(m: int, addresses: Sequence[str], token: bytes, timeout: float,
           silent: frozenset[int]) -> TCPStore | None:
    """A client of member m's lifeline, or None if it is gone: a member whose host was already found silent gets
    a last look, not a full wait."""
    return lifeline.connect(addresses[m], token, timeout,
                            lifeline.SILENT_AGAIN_SECONDS if m in silent else lifeline.SILENT_SECONDS)


def _await(client: TCPStore, key: str, deadline: float, topic: str, coordinator: int) -> bytes:
    while True:
        wait = min(0.5, _left(deadline, topic, [coordinator]))
        try:
            return client.get(key, timeout=wait)
        except CommTimeoutError:
            continue


def _left(deadline: float, topic: str, waiting: Sequence[int]) -> float:
    """Seconds to the deadline; past it, CommTimeoutError naming whom the agreement still waits for."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise CommTimeoutError(f"agreement {topic!r}: members {sorted(waiting)} neither joined nor left before the "
                               "deadline (a live member must make the same call)")
    return max(left, 0.01)

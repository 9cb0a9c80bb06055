"""The per-process runtime: this rank's store, transport, world group and sub-groups."""

from __future__ import annotations

import socket
import threading

from meshcomm import config
from meshcomm.algorithms import ALGORITHMS, DEFAULT
from meshcomm.algorithms.choice import choose, parse_override
from meshcomm.group.group import Group
from meshcomm.rendezvous import auth
from meshcomm.rendezvous.store import PrefixStore, Store
from meshcomm.transport.engine import Transport

WORLD_NAME = "default_pg"


def advertised_address(master_addr: str | None) -> str:
    """The address peers should dial: MESHCOMM_IFNAME_ADDR, else the interface that reaches the master."""
    override = config.get("MESHCOMM_IFNAME_ADDR")
    if override:
        return override
    if not master_addr or master_addr in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((master_addr, 9))  # no packet is sent for a UDP connect
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class Runtime:
    def __init__(
        self, rank: int, world_size: int, store: Store, timeout: float, master_addr: str | None, backend: str
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.store = store
        self.timeout = timeout
        self.backend = backend
        self.settings = config.settings()
        self.algorithm_override = parse_override(config.get("MESHCOMM_ALGO"), ALGORITHMS)
        self.transport = Transport(
            rank,
            world_size,
            PrefixStore("meshcomm", store),
            auth.job_token(),
            timeout,
            advertised_address(master_addr),
        )
        self.world = Group(self, tuple(range(world_size)), 0, WORLD_NAME, timeout)
        self.groups: dict[int, Group] = {0: self.world}
        self._next_group_id = 1
        self._lock = threading.Lock()

    def algorithm_for(self, problem, buffers: dict) -> str:
        """The user's MESHCOMM_ALGO choice for this collective, else the rule in algorithms/choice.py."""
        named = self.algorithm_override.get(problem.collective)
        if named is not None:
            return named
        sample = buffers.get("input")
        if sample is None:
            sample = buffers.get("output")
        return choose(problem, sample.itemsize if sample is not None else 1, DEFAULT)

    def new_group(
        self, ranks: tuple[int, ...], timeout: float | None, name: str | None, group_id: int | None = None
    ) -> Group:
        """Every rank calls this in the same order (torch's rule), so ids agree without talking.

        A caller whose ranks do not all call it (torch creates a sub-group's
        backend on its members only) passes a group_id it derived identically
        on every member instead.
        """
        with self._lock:
            if group_id is None:
                group_id = self._next_group_id
                self._next_group_id += 1
            elif group_id in self.groups:
                raise ValueError(f"group_id {group_id} is already used by group {self.groups[group_id].group_name!r}")
        group = Group(self, ranks, group_id, name or str(group_id), self.timeout if timeout is None else timeout)
        self.groups[group_id] = group
        return group

    def unused_group_id(self) -> int:
        """The lowest id above every id this rank has used; members agree on the max of theirs."""
        with self._lock:
            return max(self._next_group_id, max(self.groups) + 1)

    def reserve_group_id(self, group_id: int) -> None:
        """Keep later groups made without an explicit id from taking `group_id`."""
        with self._lock:
            self._next_group_id = max(self._next_group_id, group_id + 1)

    def close(self) -> None:
        for group in self.groups.values():
            group.shutdown()
        self.transport.close()
        self.store.close()

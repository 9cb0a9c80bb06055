"""The per-process runtime: this rank's store, transport, world group and sub-groups."""

from __future__ import annotations

import atexit
import json
import os
import socket
import threading

from meshcomm import config
from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.choice import parse_override
from meshcomm.group.group import Group
from meshcomm.rendezvous import auth
from meshcomm.rendezvous.store import PrefixStore, Store
from meshcomm.trace.messages import TracedTransport
from meshcomm.trace.writer import TraceWriter
from meshcomm.transport.engine import Transport
from meshcomm.tuner import model

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
        self.tuning, self.cores = self._agreed_tuning(PrefixStore("meshcomm/tuner", store))
        self.transport = Transport(
            rank,
            world_size,
            PrefixStore("meshcomm", store),
            auth.job_token(),
            timeout,
            advertised_address(master_addr),
        )
        # Decided once: with MESHCOMM_TRACE unset nothing is wrapped and every
        # collective pays one `is None` check.
        self.trace: TraceWriter | None = None
        trace_dir = config.get("MESHCOMM_TRACE")
        if trace_dir:
            self.trace = TraceWriter(trace_dir, rank)
            atexit.register(self.trace.close)  # a program that never calls destroy_process_group
            self.transport = TracedTransport(self.transport, self.trace)
        self.world = Group(self, tuple(range(world_size)), 0, WORLD_NAME, timeout)
        self.groups: dict[int, Group] = {0: self.world}
        self._next_group_id = 1
        self._lock = threading.Lock()

    def _agreed_tuning(self, store: Store) -> tuple[model.Parameters, int]:
        """Rank 0's cost-model parameters and core count, for every rank.

        Ranks that predicted with different parameters could pick different
        algorithms for one call and hang; one source rules that out.
        """
        if self.rank == 0:
            path = config.get("MESHCOMM_TUNING")
            try:
                parameters = model.load(path) if path else model.DEFAULTS
            except ValueError as exc:
                # Published too, so the other ranks fail with it instead of waiting out the timeout.
                store.set("agreed", json.dumps({"error": str(exc)}))
                raise
            store.set("agreed", json.dumps({"parameters": parameters.to_json(), "source": parameters.source,
                                            "cores": len(os.sched_getaffinity(0))}))
        agreed = json.loads(store.get("agreed", timeout=self.timeout))
        if "error" in agreed:
            raise ValueError(f"rank 0: {agreed['error']}")
        return model.Parameters.from_json(agreed["parameters"], agreed["source"]), agreed["cores"]

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

    def close(self) -> None:
        for group in self.groups.values():
            group.shutdown()
        self.transport.close()
        self.store.close()
        if self.trace is not None:
            self.trace.close()
            atexit.unregister(self.trace.close)

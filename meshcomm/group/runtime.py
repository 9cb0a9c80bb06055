"""The per-process runtime: this rank's store, transport, world group and sub-groups."""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence

from meshcomm import config
from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.choice import parse_override
from meshcomm.errors import AbortedError, CollectiveMismatchError, CommTimeoutError, PeerLostError, RevokedError
from meshcomm.group.group import Group
from meshcomm.group import health
from meshcomm.group.health import Monitor
from meshcomm.rendezvous import lifeline
from meshcomm.security import auth, tls
from meshcomm.rendezvous.store import PrefixStore, Store, wait_for_keys
from meshcomm.trace.flight_recorder import FlightRecorder
from meshcomm.transport import header as wire
from meshcomm.trace.messages import TracedTransport
from meshcomm.trace.writer import TraceWriter
from meshcomm.transport.engine import SocketTransport
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


_STARTED_SLICE = 0.1  # a rank waiting for the others to finish starting looks at their liveness this often


class Runtime:
    def __init__(
        self, rank: int, world_size: int, store: Store, timeout: float, master_addr: str | None, backend: str,
        token: bytes | None = None, lifelines: Sequence[str] | None = None, lineage: str = "w",
        joins_jobs: str = "",
    ) -> None:
        """`lifelines` and `lineage` are given for a group of survivors (survival.py); a job's first group
        publishes its members' lifelines in the store instead. A runtime that `joins_jobs` (MPI's Accept and
        Connect; the value names it) has none: its members' lifelines answer their own jobs' tokens, not its
        own. Its traces and dumps go to a subfolder of that name, since its rank numbers are not the job's."""
        self.rank = rank
        self.world_size = world_size
        self.store = store
        self.timeout = timeout
        self.backend = backend
        self.settings = config.settings()
        self.algorithm_override = parse_override(config.get("MESHCOMM_ALGO"), ALGORITHMS)
        self.tuning, self.cores = self._agreed_tuning(PrefixStore("meshcomm/tuner", store))
        self.token = auth.job_token() if token is None else token
        self.address = advertised_address(master_addr)
        self.transport = SocketTransport(
            rank,
            world_size,
            PrefixStore("meshcomm", store),
            self.token,
            timeout,
            self.address,
            tls.from_environment(),
        )
        # Decided once: with MESHCOMM_TRACE unset nothing is wrapped and every
        # collective pays one `is None` check.
        self.trace: TraceWriter | None = None
        trace_dir = config.get("MESHCOMM_TRACE")
        if trace_dir:
            self.trace = TraceWriter(os.path.join(trace_dir, joins_jobs), rank)
            atexit.register(self.trace.close)  # a program that never calls destroy_process_group
            self.transport = TracedTransport(self.transport, self.trace)
        self.world = Group(self, tuple(range(world_size)), 0, WORLD_NAME, timeout)
        self.groups: dict[int, Group] = {0: self.world}
        self._next_group_id = 1
        self._lock = threading.Lock()
        self.recorder = FlightRecorder(rank, world_size, folder=joins_jobs)
        self.aborted: AbortedError | None = None
        self.failed = False  # a collective of this rank failed: the store may be needed a moment longer
        self.monitor = Monitor(self, PrefixStore("meshcomm", store))
        self._previous_sigusr1 = _dump_on_sigusr1(self.recorder)
        atexit.register(self._let_peers_finish)  # a program that exits without destroy_process_group
        self.lineage = lineage
        self.joins_jobs = joins_jobs
        self.lifeline = None if joins_jobs else lifeline.of_process(self.address, self.token)
        lifelines_store = PrefixStore("meshcomm/lifeline", store)
        if lifelines is None and not joins_jobs:
            lifelines_store.set(str(rank), self.lifeline.address)
        self._wait_until_every_rank_started()
        if joins_jobs:
            self.lifelines = None
        else:
            self.lifelines = list(lifelines) if lifelines is not None else self._read_lifelines(lifelines_store)
        self._agreements: dict[int, int] = {}  # group id -> agreements made on it, for their topics

    def _read_lifelines(self, store: Store) -> list[str] | None:
        """Every member's lifeline address (each was set before its member started); None if the store left
        before this rank read them all (a shrink then says so)."""
        try:
            return [store.get(str(r), timeout=min(self.timeout, 5.0)).decode() for r in range(self.world_size)]
        except (PeerLostError, CommTimeoutError):
            return None

    def agreement_topic(self, group: Group, what: str) -> str:
        """A name for the next agreement on `group`, the same on every member (they make them in one order)."""
        with self._lock:
            count = self._agreements.get(group.group_id, 0)
            self._agreements[group.group_id] = count + 1
        return f"{self.lineage}/{group.group_id}/{what}{count}"

    def _wait_until_every_rank_started(self) -> None:
        """The last step of start-up: no rank returns while another still reads the store for its own start-up, so
        a rank 0 (the store's host) that ends or dies right after init_process_group cannot break its peers' start.
        Between looks at the store, a rank lost meanwhile is named at once."""
        store = PrefixStore("meshcomm/started", self.store)
        store.set(str(self.rank), b"1")
        others = [r for r in range(self.world_size) if r != self.rank]
        try:
            missing = wait_for_keys(store, [str(r) for r in range(self.world_size)], time.monotonic() + self.timeout,
                                    lambda left: self.transport.check_call([r for r in left if r in others], -1, -1),
                                    _STARTED_SLICE)
        except PeerLostError:
            # The store's host left after this rank's own start-up reads: this rank has started. Whether the
            # others have is theirs to find; a rank that left is named by the next call that needs it.
            return
        if missing:
            raise CommTimeoutError(f"ranks {missing} had not finished starting within {self.timeout:g} s")

    def _agreed_tuning(self, store: Store) -> tuple[model.Parameters, int]:
        """Rank 0's cost-model parameters and core count, for every rank.

        Ranks that predicted with different parameters could pick different
        algorithms for one call and hang; one source rules that out.
        """
        if self.rank == 0:
            try:
                parameters = model.configured()
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

    # ----- failures

    def explain_failure(self, group: Group, seq: int, record, error: BaseException) -> BaseException:
        """The error to raise for a failed collective, and the flight recorder dumped.

        A timeout names the ranks that had not arrived. Every failure is passed
        on to the group's other ranks at once (they may be waiting on someone
        else): a timeout or a mismatch fails just this collective there, a lost
        peer breaks their connections. It is also recorded in the store as the
        job's first failure unless another came first, so that ranks which only
        see a peer leave can say why it left."""
        where = f"seq {seq} in group {group.group_name!r}"
        self.failed = True
        if isinstance(error, RevokedError) or (isinstance(error, AbortedError) and self.aborted is error):
            return error
        if getattr(error, "from_notice", False):
            return type(error)(f"{error}, at {where}; {self._dump(f'told by a peer at {where}: {error}')}",
                               *([error.peer] if isinstance(error, PeerLostError) else []))
        others = [r for r in group.ranks if r != self.rank]
        if isinstance(error, CommTimeoutError):
            arrivals = self.monitor.who_had_not_arrived(group, seq, record)
            self.monitor.first_failure("timeout", None, str(error))
            # The group cannot finish this collective now: tell the others rather than let them wait or see us leave.
            self.transport.fail_call(others, group.group_id, seq, wire.NOTICE_TIMEOUT, f"{error}; {arrivals}")
            return CommTimeoutError(f"{error}; {arrivals}; {self._dump(f'timeout at {where}', wait_for=others)}")
        if isinstance(error, CollectiveMismatchError):
            text = str(error).replace("this rank called", f"rank {self.rank} called")
            self.transport.fail_call(others, group.group_id, seq, wire.NOTICE_MISMATCH, text)
            self.monitor.first_failure("mismatch", None, text)
            return CollectiveMismatchError(f"{error}; {self._dump(f'collective mismatch at {where}')}")
        if not isinstance(error, PeerLostError):
            return error
        self.transport.tell_peers(others, wire.NOTICE_LOST, error.peer, "")
        aborter = self.monitor.abort_reason()
        first = self.monitor.first_failure("lost", error.peer, str(error))
        dumped = self._dump(f"lost rank {error.peer} at {where}")
        if aborter is not None:
            return AbortedError(f"rank {self.rank}: the job was aborted by {aborter} ({error}); {dumped}")
        if first is not None and first[0] != self.rank:
            rank, kind, lost, text = first
            if kind == "lost" and lost != error.peer:
                return PeerLostError(f"rank {self.rank}: rank {lost} was lost (first noticed by rank {rank}) at "
                                     f"{where}; here: {error}; {dumped}", lost)
            if kind != "lost":
                return PeerLostError(f"{error} at {where}, after the job's first failure, on rank {rank}: {text}; "
                                     f"{dumped}", error.peer)
        return PeerLostError(f"{error} at {where}; {dumped}", error.peer)

    def _dump(self, reason: str, wait_for: Sequence[int] = ()) -> str:
        """Dump this rank's flight recorder and ask the other ranks to dump theirs (waiting, briefly, for the ranks
        `wait_for`)."""
        try:
            path = self.recorder.dump(reason)
        except OSError as exc:
            return f"flight recorder could not be dumped: {exc}"
        self.monitor.request_dumps(wait_for)
        return f"flight recorder dumped to {path} (`meshcomm doctor {os.path.dirname(path)}` compares the ranks)"

    def abort(self, reason: str = "") -> None:
        """Fail every pending and future operation of this rank, and tell the other ranks to do the same."""
        message = f"rank {self.rank} calling abort()" + (f": {reason}" if reason else "")
        # The store first: a peer that sees our notice and leaves may take the store with it.
        self.monitor.announce_abort(message)
        self.abort_locally(AbortedError(f"rank {self.rank}: aborted by abort()" + (f": {reason}" if reason else "")),
                           notice=reason)

    def retire(self, error: AbortedError) -> None:
        """Replaced by a group of survivors (survival.shrink): every call here raises `error`; let go of the job."""
        self.abort_locally(error)
        self.close(linger=False)  # whoever still needs its store is a survivor, retiring too, or gone

    def abort_locally(self, error: AbortedError, notice: str | None = None) -> None:
        with self._lock:
            if self.aborted is not None:
                return
            self.aborted = error
        self.transport.abort(error, notice)

    def unused_group_id(self) -> int:
        """The lowest id above every id this rank has used; members agree on the max of theirs."""
        with self._lock:
            return max(self._next_group_id, max(self.groups) + 1)

    def reserve_group_id(self, group_id: int) -> None:
        """Keep later groups made without an explicit id from taking `group_id`."""
        with self._lock:
            self._next_group_id = max(self._next_group_id, group_id + 1)

    def _let_peers_finish(self) -> None:
        """If this rank serves the job's store, serve on until the other ranks have left it (at most the
        timeout; after a failure, as long as they need to report): a rank may exit right after its last call
        while its peers' later calls still need the store (a sub-group's first board call, a rendezvous).
        A survivors' store (lifeline.SurvivorStore) is first told that this rank leaves."""
        if hasattr(self.store, "leave"):
            self.store.leave()
        if hasattr(self.store, "linger"):
            self.store.linger(health.REPORT_WAIT_SECONDS + 1.0 if self.failed else self.timeout)

    def close(self, linger: bool = True) -> None:
        self.monitor.stop()
        if self._previous_sigusr1 is not None:
            signal.signal(signal.SIGUSR1, self._previous_sigusr1)
        for group in self.groups.values():
            group.shutdown()
        atexit.unregister(self._let_peers_finish)
        if linger:
            self._let_peers_finish()
        self.transport.close()
        self.store.close()
        if self.trace is not None:
            self.trace.close()
            atexit.unregister(self.trace.close)


def _dump_on_sigusr1(recorder: FlightRecorder):
    """Dump the flight recorder on SIGUSR1 (only from the main thread, and only if
    nobody else handles that signal); returns the handler to restore, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL:
        return None

    def dump(signum, frame) -> None:
        recorder.dump("SIGUSR1")

    return signal.signal(signal.SIGUSR1, dump)

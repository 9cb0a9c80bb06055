"""What the ranks of a job tell each other through the store, off the hot path.

A collective never talks to the store. A background thread (the monitor) does,
a few times a second:

- it publishes how far this rank got in each group (`progress/<group>/<rank>`:
  last started sequence number, its state and call) once that has stayed the
  same for MESHCOMM_PROGRESS_AFTER seconds, i.e. when this rank is stuck in a
  collective or idle after one. A rank whose collective times out reads these
  to name the ranks that had not arrived;
- it watches for `abort`, set by a rank that called meshcomm.abort(), and
  then fails this rank's pending operations with AbortedError;
- it watches `dump_requests`, a counter a rank raises when it dumps its
  flight recorder after a failure, and dumps this rank's too, so that
  `meshcomm doctor` also sees the ranks that were not in the failed collective;
  it then sets `dumped/<request>/<rank>` for each request its dump answers.
  A rank whose collective timed out waits a moment for those of the others
  before it raises: a rank stuck outside any collective dumps only this way,
  and the failing rank's exit may end the job (and rank 0's store) at once.

A store that stops answering is given up after its first failure: the job's
collectives do not need it, and no error report may wait on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from meshcomm import config
from meshcomm.errors import AbortedError, CommTimeoutError
from meshcomm.executor import fingerprint as fp
from meshcomm.trace import flight_recorder as fr

ABORT_KEY = "abort"
DUMP_KEY = "dump_requests"
DUMPED_KEY = "dumped"  # dumped/<request>/<rank>: the rank has dumped since request number <request>
DUMP_WAIT_SECONDS = 2.0  # longest a timed-out rank waits for the others' dumps (their monitors look every 0.5 s)
FIRST_FAILURE_KEY = "first_failure"  # "rank|kind|peer|message", set once, by the first rank to fail
_POLL_SECONDS = 0.5  # the store is a fallback: notices on the data connections carry failures at once
REPORT_WAIT_SECONDS = 2.0  # longest a timeout error waits for the store to say where the others are


def progress_key(group_name: str, rank: int) -> str:
    return f"progress/{group_name}/{rank}"


def describe_progress(entry: list | None) -> str:
    if entry is None:
        return "-1 none"
    return f"{entry[fr.SEQ]} {entry[fr.STATE]} {fp.describe(entry[fr.FINGERPRINT])}"


class Monitor:
    """The runtime's store-facing thread: progress out, abort in."""

    def __init__(self, runtime, store) -> None:
        self.runtime = runtime
        self.store = store
        self.store_lost = False
        self.after = max(config.get_float("MESHCOMM_PROGRESS_AFTER"), 0.0)
        self._published: dict[str, tuple] = {}  # group name -> (latest seq, state) last written
        self._seen: dict[str, tuple] = {}  # group name -> (latest seq, state, monotonic time first seen)
        self._dumps_seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="meshcomm-monitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(_POLL_SECONDS):
            if self.store_lost:
                return
            try:
                self._publish_settled_progress()
                self._watch_for_abort()
                self._watch_for_dump_requests()
            except Exception:  # the store went away or refused: stop using it
                self.store_lost = True

    def _publish_settled_progress(self) -> None:
        now = time.monotonic()
        recorder = self.runtime.recorder
        for group in list(self.runtime.groups.values()):
            entry = recorder.latest(group.group_name)
            state = (None, None) if entry is None else (entry[fr.SEQ], entry[fr.STATE])
            seen = self._seen.get(group.group_name)
            if seen is None or seen[:2] != state:
                self._seen[group.group_name] = (*state, now)
                continue
            if now - seen[2] >= self.after and self._published.get(group.group_name) != state:
                self.store.set(progress_key(group.group_name, self.runtime.rank), describe_progress(entry))
                self._published[group.group_name] = state

    def _watch_for_abort(self) -> None:
        if self.runtime.aborted is None and self.store.check([ABORT_KEY]):
            who = self.store.get(ABORT_KEY, timeout=1.0).decode(errors="replace")
            self.runtime.abort_locally(AbortedError(f"rank {self.runtime.rank}: the job was aborted by {who}"))

    def _watch_for_dump_requests(self) -> None:
        requests = self.store.add(DUMP_KEY, 0)
        if requests > self._dumps_seen:
            self.runtime.recorder.dump("another rank failed and asked every rank to dump")
            self._answered(requests)

    def _answered(self, requests: int) -> None:
        """Say that this rank's latest dump answers every dump request up to number `requests`."""
        for request in range(self._dumps_seen + 1, requests + 1):
            self.store.set(f"{DUMPED_KEY}/{request}/{self.runtime.rank}", b"1")
        self._dumps_seen = max(self._dumps_seen, requests)

    def request_dumps(self, wait_for: Sequence[int] = ()) -> None:
        """Ask every rank's monitor to dump its flight recorder, and wait until the ranks `wait_for` have (best
        effort, bounded by DUMP_WAIT_SECONDS: a dead rank never does)."""

        def ask() -> None:
            request = self.store.add(DUMP_KEY, 1)
            self._answered(request)  # this rank has just dumped
            if wait_for:
                try:
                    self.store.wait([f"{DUMPED_KEY}/{request}/{rank}" for rank in wait_for], DUMP_WAIT_SECONDS)
                except CommTimeoutError:
                    pass  # some did not answer in time (gone, or stuck where their monitor cannot run)

        self._bounded(ask, DUMP_WAIT_SECONDS + 2.0 if wait_for else 2.0)

    def announce_abort(self, message: str) -> None:
        """Tell the other ranks (best effort, bounded: a dead store must not block abort)."""
        self._bounded(lambda: self.store.set(ABORT_KEY, message))

    def abort_reason(self) -> str | None:
        """Who aborted the job, if anyone did (asked when a peer vanished, to say why)."""
        found: list[str] = []

        def ask() -> None:
            if self.store.check([ABORT_KEY]):
                found.append(self.store.get(ABORT_KEY, timeout=1.0).decode(errors="replace"))

        self._bounded(ask)
        return found[0] if found else None

    def first_failure(self, kind: str, peer: int | None, message: str) -> tuple[int, str, int, str] | None:
        """Record this failure unless another came first; return the job's first (rank, kind, peer, message).

        A rank that fails usually leaves, so its peers then see it vanish; this
        lets them say what actually went wrong first, and where."""
        found: list[bytes] = []
        mine = f"{self.runtime.rank}|{kind}|{-1 if peer is None else peer}|{message[:500]}"
        self._bounded(lambda: found.append(self.store.compare_set(FIRST_FAILURE_KEY, "", mine)))
        if not found:
            return None
        rank, kind, lost, text = found[0].decode(errors="replace").split("|", 3)
        return int(rank), kind, int(lost), text

    def who_had_not_arrived(self, group, seq: int, record) -> str:
        """After a timeout at `seq` (`record` its flight recorder's handle): which ranks of `group` were not in that
        collective, from the store."""
        me = self.runtime.rank
        recorder = self.runtime.recorder
        entry = recorder.row(record)
        if entry is None:  # pushed out of the ring: its group's latest is this call, unless a newer one started
            latest = recorder.latest(group.group_name)
            entry = latest if latest is not None and latest[fr.SEQ] == seq else None
        reports: dict[int, str] = {}

        def ask() -> None:
            self.store.set(progress_key(group.group_name, me), describe_progress(entry))
            keys = {rank: progress_key(group.group_name, rank) for rank in group.ranks if rank != me}
            deadline = time.monotonic() + min(self.after + 1.0, REPORT_WAIT_SECONDS)
            while True:
                for rank, key in keys.items():
                    if rank not in reports and self.store.check([key]):
                        reports[rank] = self.store.get(key, timeout=1.0).decode(errors="replace")
                if len(reports) == len(keys) or time.monotonic() >= deadline:
                    return
                time.sleep(0.05)

        if not self._bounded(ask, REPORT_WAIT_SECONDS + 1.0):
            return "the store did not answer, so where the other ranks are is unknown"
        return summarize_progress(group.ranks, me, seq, reports)

    def _bounded(self, action, seconds: float = 2.0) -> bool:
        """Run a store action on its own thread for at most `seconds`; False if it failed or hung."""
        if self.store_lost:
            return False
        outcome: list[bool] = []

        def attempt() -> None:
            try:
                action()
                outcome.append(True)
            except Exception:
                self.store_lost = True

        helper = threading.Thread(target=attempt, name="meshcomm-store-query", daemon=True)
        helper.start()
        helper.join(seconds)
        if helper.is_alive():
            self.store_lost = True
        return bool(outcome)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def summarize_progress(ranks: tuple, me: int, seq: int, reports: dict[int, str]) -> str:
    """'ranks [2] had not arrived (rank 2: last seq 4 done all_reduce(...)); rank 1 is in it'."""
    absent, present = [], []
    for rank in ranks:
        if rank == me:
            continue
        report = reports.get(rank)
        if report is None:
            absent.append((rank, "reported nothing: dead, hung, or never started"))
            continue
        their_seq, _, rest = report.partition(" ")
        state, _, call = rest.partition(" ")
        if int(their_seq) < seq:
            absent.append((rank, f"last at seq {their_seq}, {state} {call}".rstrip()))
        else:
            present.append(rank)
    if not absent:
        return f"every other rank of the group reached seq {seq}"
    names = ", ".join(f"rank {rank}: {why}" for rank, why in absent)
    text = f"ranks {[rank for rank, _ in absent]} had not arrived ({names})"
    if present:
        text += f"; ranks {present} had"
    return text

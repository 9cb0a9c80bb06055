"""The flight recorder: a small ring of this rank's recent operations, dumped when something goes wrong.

Recording must cost next to nothing beside an 8-byte all_reduce, one of the
cheapest calls (benchmarks/results/design-figures-2026-11-25.md), so an
entry is a plain list appended to a bounded deque and updated in place when
the operation ends; nothing is formatted until a dump. The fingerprint
(collective, dtype, op, root, count) is kept as its 16 bytes and decoded
only when written out. Point-to-point operations are recorded too (kind
"p2p", their words in place of a fingerprint, no sequence number: they are
not numbered alike on every rank), so a dump shows a receive that never
completed.

A dump is one JSON file per rank, `rank<N>.json` in MESHCOMM_DUMP_DIR, written
on a timeout, on a lost peer and on SIGUSR1; `meshcomm doctor DIR` lines the
ranks' files up (meshcomm/trace/doctor.py).
"""

from __future__ import annotations

import collections
import json
import os
import socket
import tempfile
import threading
import time

from meshcomm import config
from meshcomm.executor import fingerprint as fp

# Positions in an entry list (a list, not an object: appending one is the cheapest record there is).
GROUP, SEQ, FINGERPRINT, ALGORITHM, PEERS, STATE, STARTED, ENDED, ERROR = range(9)
STARTED_STATE, DONE_STATE, FAILED_STATE = "started", "done", "failed"


def dump_dir() -> str:
    """Where dumps go: MESHCOMM_DUMP_DIR, else a per-job folder in the temp dir."""
    chosen = config.get("MESHCOMM_DUMP_DIR")
    if chosen:
        return chosen
    job = config.get("MESHCOMM_JOB_ID") or config.get("MESHCOMM_MASTER_PORT") or str(os.getppid())
    return os.path.join(tempfile.gettempdir(), f"meshcomm-dumps-{job}")


class FlightRecorder:
    """This rank's last `capacity` collectives, oldest first."""

    def __init__(self, rank: int, world_size: int, capacity: int | None = None, folder: str = "") -> None:
        """`folder`: a subfolder of the dump folder, for a runtime whose ranks are not the job's (MPI's Accept)."""
        self.rank = rank
        self.world_size = world_size
        self.folder = folder
        size = capacity if capacity is not None else config.get_int("MESHCOMM_FLIGHT_RECORDER_SIZE")
        self.entries: collections.deque = collections.deque(maxlen=size if size is not None else 256)
        # group name -> [last started seq, its entry]: kept beyond the ring so
        # progress is known even for a group whose entries were pushed out.
        self.latest: dict[str, list] = {}
        self._dump_lock = threading.Lock()
        self._reasons: list[str] = []  # every dump rewrites the file; no reason given earlier is lost

    def start(self, group: str, seq: int, fingerprint: bytes, algorithm: str, peers: tuple) -> list:
        entry = [group, seq, fingerprint, algorithm, peers, STARTED_STATE, time.time(), None, None]
        self.entries.append(entry)
        self.latest[group] = entry
        return entry

    def start_p2p(self, group: str, words: str, peer: int | None) -> list:
        """A send or receive: `words` says what ("send 4096 B to rank 1, tag 0")."""
        entry = [group, None, words, "p2p", () if peer is None else (peer,), STARTED_STATE, time.time(), None, None]
        self.entries.append(entry)
        return entry

    @staticmethod
    def finish(entry: list, error: BaseException | None = None) -> None:
        entry[ENDED] = time.time()
        if error is None:
            entry[STATE] = DONE_STATE
        else:
            entry[STATE] = FAILED_STATE
            entry[ERROR] = f"{type(error).__name__}: {error}"

    def snapshot(self, reason: str) -> dict:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "reason": "; then ".join(self._reasons),
            "dumped_at": time.time(),
            "operations": [describe(entry) for entry in list(self.entries)],
        }

    def dump(self, reason: str, directory: str | None = None) -> str:
        """Write rank<N>.json (replacing an earlier dump of this rank); returns its path."""
        directory = directory or os.path.join(dump_dir(), self.folder)
        with self._dump_lock:
            self._reasons.append(reason)
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"rank{self.rank}.json")
            partial = f"{path}.{os.getpid()}.tmp"
            with open(partial, "w") as out:
                json.dump(self.snapshot(reason), out, indent=1)
            os.replace(partial, path)  # a reader never sees half a file
        return path


def describe(entry: list) -> dict:
    """An entry as JSON-ready fields, the fingerprint spelled out."""
    what = entry[FINGERPRINT]
    if isinstance(what, str):  # a point-to-point operation's words
        fields, call = {"kind": "p2p"}, what
    else:
        fields, call = {"kind": "collective", **fp.fields(what)}, fp.describe(what)
    ended = entry[ENDED]
    return {
        "group": entry[GROUP],
        "seq": entry[SEQ],
        **fields,
        "call": call,
        "algorithm": entry[ALGORITHM],
        "peers": list(entry[PEERS]),
        "state": entry[STATE],
        "started": entry[STARTED],
        "seconds": None if ended is None else round(ended - entry[STARTED], 6),
        "error": entry[ERROR],
    }

"""The flight recorder: a small ring of this rank's recent operations, dumped when something goes wrong.

Recording must cost next to nothing beside an 8-byte all_reduce, one of the
cheapest calls (benchmarks/results/design-figures-2026-11-25.md). The ring is
compiled where the extension is (native/records.c), so a lane writes its
record in place with no Python object made; trace/records.py is its
pure-Python twin. A record is a handle from `start`, updated when the
operation ends; nothing is formatted until a dump. The fingerprint
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

import json
import os
import socket
import tempfile
import threading
import time

from meshcomm import config, native
from meshcomm.executor import fingerprint as fp
from meshcomm.trace.records import Records

# Positions in a record read as a list (rows, row, latest).
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
    """This rank's last `capacity` operations, oldest first: `start(group, seq, fingerprint, algorithm, peers)` records
    one and returns its handle for `finish`."""

    def __init__(self, rank: int, world_size: int, capacity: int | None = None, folder: str = "") -> None:
        """`folder`: a subfolder of the dump folder, for a runtime whose ranks are not the job's (MPI's Accept)."""
        self.rank = rank
        self.world_size = world_size
        self.folder = folder
        size = capacity if capacity is not None else config.get_int("MESHCOMM_FLIGHT_RECORDER_SIZE")
        made = Records if native.core is None else native.core.Records
        # The ring; a lane writes to it directly. Each group's latest collective is kept beyond it, so progress is
        # known even for a group whose records were pushed out.
        self.records = made(size if size is not None else 256, (STARTED_STATE, DONE_STATE, FAILED_STATE))
        self.start = self.records.start  # bound once: it runs on every call
        self._dump_lock = threading.Lock()
        self._reasons: list[str] = []  # every dump rewrites the file; no reason given earlier is lost

    def start_p2p(self, group: str, words: str, peer: int | None):
        """A send or receive: `words` says what ("send 4096 B to rank 1, tag 0")."""
        return self.records.start(group, None, words, "p2p", () if peer is None else (peer,))

    def finish(self, record, error: BaseException | None = None) -> None:
        """`record` (start's handle) done, or failed with `error`."""
        self.records.finish(record, None if error is None else f"{type(error).__name__}: {error}")

    def row(self, record) -> list | None:
        """`record` (start's handle) as a list, or None once it has left the ring."""
        return self.records.row(record)

    def entries(self) -> list[list]:
        """The records in the ring, oldest first, as lists (copies)."""
        return self.records.rows()

    def latest(self, group: str) -> list | None:
        """`group`'s latest collective as a list, or None before its first."""
        return self.records.latest(group)

    def snapshot(self, reason: str) -> dict:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "reason": "; then ".join(self._reasons),
            "dumped_at": time.time(),
            "operations": [describe(entry) for entry in self.entries()],
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

"""One rank's trace file: Chrome trace events, one JSON object a line, in nanoseconds.

The file is written as the job runs and flushed every second, so a rank that
crashes leaves a readable file (at most its last line torn). Timestamps and
durations are integer nanoseconds of the wall clock, taken from the monotonic
clock plus an offset sampled once: ranks of one host are comparable to the
nanosecond, ranks of different hosts only as well as their clocks agree.
`meshcomm trace merge` turns them into microseconds, which the format wants.
"""

from __future__ import annotations

import json
import os
import threading
import time

FORMAT = "meshcomm-trace-1"
_FLUSH_SECONDS = 1.0
_encode = json.JSONEncoder(separators=(",", ":")).encode


def file_name(rank: int) -> str:
    return f"rank{rank}.jsonl"


class TraceWriter:
    """Appends this rank's events to `directory`/rank<N>.jsonl; safe to call from any thread."""

    def __init__(self, directory: str, rank: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.rank = rank
        self.path = os.path.join(directory, file_name(rank))
        self._offset = time.time_ns() - time.perf_counter_ns()
        self._lock = threading.Lock()
        self._file = open(self.path, "w", encoding="utf-8")
        self._flushed = time.monotonic()
        self._threads: dict[int, int] = {}  # thread ident -> tid in the trace
        self._local = threading.local()
        self._write({"ph": "M", "name": "meshcomm_trace", "pid": rank, "args": {"format": FORMAT, "rank": rank}})
        self._write({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        self._write({"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}})
        self._file.flush()  # a rank that dies at once still leaves a file that merge recognises

    def now(self) -> int:
        """Nanoseconds of the wall clock, read from the monotonic clock."""
        return time.perf_counter_ns() + self._offset

    def tid(self) -> int:
        """This thread's track within the rank: 0 for the first thread seen, then 1, 2, …"""
        tid = getattr(self._local, "tid", None)
        if tid is None:
            with self._lock:
                tid = self._threads.setdefault(threading.get_ident(), len(self._threads))
            self._local.tid = tid
            name = threading.current_thread().name
            self._write({"ph": "M", "name": "thread_name", "pid": self.rank, "tid": tid, "args": {"name": name}})
        return tid

    @staticmethod
    def encode(args: dict) -> str:
        return _encode(args)

    def complete(self, category: str, name: str, start: int, end: int, args: dict | str) -> None:
        """A complete ("X") event from `start` to `end` (ns) on this thread's track.

        `args` may come already encoded as a JSON object: a message's event is
        written on the traced hot path, where json.dumps would be most of its cost.
        """
        encoded = args if isinstance(args, str) else _encode(args)
        self._write_line(
            f'{{"ph":"X","cat":"{category}","name":"{name}","ts":{start},"dur":{max(end - start, 0)},'
            f'"pid":{self.rank},"tid":{self.tid()},"args":{encoded}}}\n'
        )

    def _write(self, event: dict) -> None:
        self._write_line(_encode(event) + "\n")

    def _write_line(self, line: str) -> None:
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line)
            if time.monotonic() - self._flushed > _FLUSH_SECONDS:
                self._file.flush()
                self._flushed = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

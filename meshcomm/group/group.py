"""A Group: an ordered set of global ranks that run collectives together.

Collectives of a group are numbered in call order (the sequence number goes
into every message key), so several groups can run at once without their
messages crossing. Async operations go to the group's single worker thread
and complete in issue order; a blocking call waits for the queue first.
"""

from __future__ import annotations

import functools
import queue
import threading
from typing import Callable

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.executor import executor
from meshcomm.executor import fingerprint as fp
from meshcomm.group.work import Work


@functools.lru_cache(maxsize=512)
def _schedule(problem: Problem, rank: int, algorithm: str | None):
    return get_schedule(problem, rank, algorithm)


class Group:
    def __init__(self, runtime, ranks: tuple[int, ...], group_id: int, name: str, timeout: float) -> None:
        self.runtime = runtime
        self.ranks = tuple(ranks)
        self.group_id = group_id
        self.group_name = name
        self.timeout = timeout
        self.rank = self.ranks.index(runtime.rank) if runtime.rank in self.ranks else -1
        self.size = len(self.ranks)
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._queue: queue.Queue | None = None
        self._pending = 0
        self._worker: threading.Thread | None = None
        self.destroyed = False
        self._mailbox = None

    def __repr__(self) -> str:
        return f"<Group {self.group_name!r} ranks={list(self.ranks)}>"

    @property
    def mailbox(self):
        """MPI-style point-to-point matching for this group, made on first use."""
        if self._mailbox is None:
            from meshcomm.group.mailbox import Mailbox

            self._mailbox = Mailbox(self)
        return self._mailbox

    # ----- identity

    def global_rank(self, group_rank: int) -> int:
        return self.ranks[group_rank]

    def group_rank(self, global_rank: int) -> int:
        return self.ranks.index(global_rank)

    # ----- running operations

    def collective(
        self,
        problem: Problem,
        buffers: dict,
        dtype_name: str,
        op_name: str,
        combine,
        algorithm: str | None,
        async_op: bool,
        finish: Callable[[], object] | None = None,
        timeout: float | None = None,
    ) -> Work | None:
        """Run (or queue) one collective described by `problem` on this rank's buffers."""
        if algorithm is None:
            algorithm = self.runtime.algorithm_for(problem, buffers)
        schedule = _schedule(problem, self.rank, algorithm)
        fingerprint = fp.pack(problem.collective, dtype_name, op_name, problem.root, problem.payload_elements())
        settings = self.runtime.settings

        def job(seq: int) -> object:
            call = executor.Call(
                schedule=schedule,
                buffers=buffers,
                combine=combine,
                peers=list(self.ranks),
                group_id=self.group_id,
                group_name=self.group_name,
                seq=seq,
                fingerprint=fingerprint,
                chunk_bytes=settings.chunk_bytes,
                timeout=self.timeout if timeout is None else timeout,
            )
            executor.run(call, self.runtime.transport)
            return finish() if finish is not None else None

        return self.submit(f"{problem.collective} on group {self.group_name!r}", job, async_op)

    def submit(self, description: str, job: Callable[[int], object], async_op: bool) -> Work | None:
        """Give `job` the next sequence number and run it now or on the worker, in issue order."""
        with self._seq_lock:
            seq = self._seq
            self._seq += 1
            queued = async_op or self._pending > 0
            if queued:
                self._pending += 1
                work = Work(f"{description} (seq {seq})")
                self._ensure_worker().put((work, job, seq))
        if not queued:
            return _inline(job, seq)
        if async_op:
            return work
        work.wait()
        return None

    def _ensure_worker(self) -> queue.Queue:
        if self._queue is None:
            self._queue = queue.Queue()
            self._worker = threading.Thread(target=self._drain, name=f"meshcomm-{self.group_name}", daemon=True)
            self._worker.start()
        return self._queue

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, job, seq = item
            try:
                work._result = job(seq)
                error = None
            except BaseException as exc:  # handed to whoever waits on the Work
                error = exc
            with self._seq_lock:
                self._pending -= 1
            work._finish(error)

    def shutdown(self) -> None:
        self.destroyed = True
        if self._queue is not None:
            self._queue.put(None)
            self._worker.join(timeout=5)


def _inline(job: Callable[[int], object], seq: int) -> None:
    job(seq)

"""A Group: an ordered set of global ranks that run collectives together.

Collectives of a group are numbered in call order (the sequence number goes
into every message key), so several groups can run at once without their
messages crossing. Async operations go to the group's single worker thread
and complete in issue order; a blocking call waits for the queue first.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import queue
import sys
import threading
from typing import Callable, NamedTuple

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.executor import board as board_executor
from meshcomm.executor import executor
from meshcomm.executor import fingerprint as fp
from meshcomm.group.work import Work
from meshcomm.rendezvous.store import PrefixStore
from meshcomm.transport.board import Board
from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.predict import predict


_PLANS_KEPT = 512  # a group's calls of that many shapes, dtypes and ops find their plan made


class _Plan(NamedTuple):
    """How this rank runs calls of one (problem, dtype, op, itemsize, algorithm); see Group._plan."""

    fingerprint: bytes
    algorithm: str
    description: str
    board: board_executor.Plan | None  # on the group's board, or
    schedule: object  # as messages, by this schedule


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
        # The host index of each member when the group spans several hosts (node-aware algorithms
        # read it from the Problem); empty on one host, so single-host calls pay nothing for it.
        spread = tuple(runtime.transport.host_of[r] for r in self.ranks)
        self.hosts = spread if len(set(spread)) > 1 else ()
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._queue: queue.Queue | None = None
        self._pending = 0
        self._worker: threading.Thread | None = None
        self.destroyed = False
        self._chooser: Chooser | None = None  # built at the first automatic choice
        self._debug = runtime.settings.debug in ("INFO", "DEBUG")
        self._tabled: set[str] = set()  # collectives whose cost table MESHCOMM_DEBUG printed
        self._mailbox = None
        self._on_one_host: bool | None = None  # every member shares memory with this rank (decided at first need)
        self._single_copy: bool | None = None  # and the host's ranks can read and write each other's memory (likewise)
        self._board: Board | None = None
        self._plans: dict[tuple, _Plan] = {}  # see _plan

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
        key = (problem, dtype_name, op_name, _itemsize(buffers), algorithm)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(key, buffers)
        limit = self.timeout if timeout is None else timeout
        run = self._run_as_messages if plan.board is None else self._run_on_board
        recorder = self.runtime.recorder

        def job(seq: int) -> object:
            entry = recorder.start(self.group_name, seq, plan.fingerprint, plan.algorithm, self.ranks)
            try:
                run(plan, seq, buffers, combine, limit)
            except Exception as exc:
                recorder.finish(entry, exc)
                raise self.runtime.explain_failure(self, seq, entry, exc) from None
            recorder.finish(entry)
            return finish() if finish is not None else None

        return self.submit(plan.description, job, async_op)

    def _plan(self, key: tuple, buffers: dict) -> _Plan:
        """How this rank runs every call of `key` (problem, dtype, op, itemsize, algorithm): all of it is decided
        alike for each such call, so it is kept for the next one. Not under MESHCOMM_DEBUG, where every call is
        to print its choice."""
        problem, dtype_name, op_name, itemsize, algorithm = key
        if self.hosts:
            problem = dataclasses.replace(problem, hosts=self.hosts)
        if algorithm is None:
            algorithm = self.algorithm_for(problem, buffers)
        elif self._debug:
            self._say_choice(problem, buffers, algorithm, "algorithm=; ")
        fingerprint = fp.pack(problem.collective, dtype_name, op_name, problem.root, problem.payload_elements())
        description = f"{problem.collective} on group {self.group_name!r}"
        if algorithm in board_executor.ALGORITHMS and self._fits_board(problem, buffers, algorithm):
            on_board = board_executor.plan(problem, self.rank, itemsize, algorithm)
            plan = _Plan(fingerprint, algorithm, description, on_board, None)
        else:
            plan = _Plan(fingerprint, algorithm, description, None, _schedule(problem, self.rank, algorithm))
        if not self._debug:
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _run_as_messages(self, plan: _Plan, seq: int, buffers: dict, combine, timeout: float) -> None:
        call = executor.Call(
            schedule=plan.schedule,
            buffers=buffers,
            combine=combine,
            peers=list(self.ranks),
            group_id=self.group_id,
            group_name=self.group_name,
            seq=seq,
            fingerprint=plan.fingerprint,
            chunk_bytes=self.runtime.settings.chunk_bytes,
            timeout=timeout,
            trace=self.runtime.trace,
        )
        executor.run(call, self.runtime.transport)

    # ----- the board: `direct` and `two_shot` collectives through shared memory

    def _fits_board(self, problem: Problem, buffers: dict, algorithm: str) -> bool:
        """Whether this call runs on the group's board; every member decides alike (same problem, same hosts)."""
        if not board_executor.fits(problem, _itemsize(buffers), self.single_copy, algorithm):
            return False
        if self._on_one_host is None:
            self._on_one_host = self.runtime.transport.shares_memory_with(self.ranks)
        return self._on_one_host

    @property
    def single_copy(self) -> bool:
        """Whether the group's board may take posts by reference: the same answer on every member."""
        if self._single_copy is None:
            self._single_copy = self.runtime.transport.reaches_memory_of(self.ranks)
        return self._single_copy

    def _run_on_board(self, plan: _Plan, seq: int, buffers: dict, combine, timeout: float) -> None:
        transport = self.runtime.transport
        transport.raise_if_aborted()  # what a message's send would raise: nothing is posted after an abort
        if self._board is None:
            # Made at the group's first board call, which every member makes (same seq, same decision).
            digest = hashlib.sha256(repr(self.ranks).encode()).hexdigest()[:16]
            self._board = Board.join(PrefixStore("meshcomm/board", self.runtime.store), f"{self.group_id}/{digest}",
                                     self.rank, self.size, board_executor.SLOT_BYTES, transport.job, timeout)
        trace = self.runtime.trace
        start = trace.now() if trace is not None else 0
        board_executor.run(self._board, plan.board, seq, plan.fingerprint, buffers, combine,
                           timeout, transport.spin_seconds, not transport.crowded,
                           lambda missing: transport.check_call([self.ranks[m] for m in missing], self.group_id, seq),
                           self.group_name,
                           self.ranks)
        if trace is not None:
            trace.complete("collective", plan.board.problem.collective, start, trace.now(),
                           {"group": self.group_name, "group_id": self.group_id, "seq": seq, "algorithm": plan.algorithm,
                            "call": fp.describe(plan.fingerprint), "board": True})

    def algorithm_for(self, problem: Problem, buffers: dict) -> str:
        """The user's MESHCOMM_ALGO choice for this collective, else the tuning file's measured or the model's pick."""
        named = self.runtime.algorithm_override.get(problem.collective)
        if named is None:
            choice = self.chooser.choose(problem, _itemsize(buffers))
            named = choice.name
            if self._debug:
                self._say_choice(problem, buffers, named, "" if choice.how == "predicted" else f"{choice.how}; ")
        elif self._debug:
            self._say_choice(problem, buffers, named, "MESHCOMM_ALGO; ")
        return named

    @property
    def chooser(self) -> Chooser:
        if self._chooser is None:
            labels = self.runtime.transport.link_labels
            self._chooser = Chooser(self.runtime.tuning, self.size, [labels[r] for r in self.ranks],
                                    self.runtime.cores, self.hosts, self.single_copy)
        return self._chooser

    def _say_choice(self, problem: Problem, buffers: dict, name: str, why: str) -> None:
        """MESHCOMM_DEBUG=INFO: the collective's cost table once per group, and this call's algorithm."""
        itemsize = _itemsize(buffers)
        prefix = f"meshcomm rank {self.runtime.rank} group {self.group_name!r}:"
        if problem.collective not in self._tabled:
            self._tabled.add(problem.collective)
            tuning = self.runtime.tuning
            print(f"{prefix} cost table, predicted µs on {self.size} ranks ({tuning.source}):", file=sys.stderr)
            for line in self.chooser.table(problem.collective, itemsize):
                print(f"{prefix}   {line}", file=sys.stderr)
        c = self.chooser
        seconds = predict(problem, name, itemsize, c.parameters, c.hosts, c.cores, c.single_copy)
        nbytes = problem.payload_elements() * itemsize
        print(f"{prefix} {problem.collective} {nbytes} B -> {name} ({why}predicted {seconds * 1e6:.0f} µs)",
              file=sys.stderr, flush=True)

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
            job(seq)
            return None
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
        if self._board is not None:
            self._board.close()
            self._board = None


def _itemsize(buffers: dict) -> int:
    sample = buffers.get("input")
    if sample is None:
        sample = buffers.get("output")
    return sample.itemsize if sample is not None else 1

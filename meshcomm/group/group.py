"""A Group: an ordered set of global ranks that run collectives together.

Collectives of a group are numbered in call order (the sequence number goes
into every message key), so several groups can run at once without their
messages crossing. Async operations go to the group's single worker thread
and complete in issue order; a blocking call waits for the queue first.
"""

from __future__ import annotations

import dataclasses
import functools
import queue
import sys
import threading
from typing import Callable, NamedTuple

from meshcomm import native
from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.board import run as board_run
from meshcomm.board.seat import Seat
from meshcomm.errors import CommTimeoutError
from meshcomm.executor import executor
from meshcomm.executor import fingerprint as fp
from meshcomm.group import lanes
from meshcomm.group.call import Call, seconds
from meshcomm.group.turns import Turns
from meshcomm.group.work import MessageWork, QueuedWork, Work
from meshcomm.transport.header import KIND_P2P, Key
from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.predict import predict


_PLANS_KEPT = 512  # a group's calls of that many shapes, dtypes and ops find their plan made


def _describe_message(what: str, peer: int | None, tag: int) -> str:
    return f"{what} {'any rank' if peer is None else f'rank {peer}'} (tag {tag})"


class _Plan(NamedTuple):
    """How this rank runs calls of one (problem, dtype, op, algorithm); see Group._plan."""

    fingerprint: bytes
    algorithm: str
    description: str
    board: board_run.Plan | None  # on the group's board, or
    schedule: object  # as messages, by this schedule
    compiled: bool  # on the board by the compiled path, untraced (Group._run_compiled)


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
        self._turns = native.core.Turns() if native.core is not None else Turns()
        self._seq_lock = threading.Lock()
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        self.destroyed = False
        self.failed: tuple[int, ...] = ()  # members found gone by the last agreement or shrink (survival.py)
        self._chooser: Chooser | None = None  # built at the first automatic choice
        self._debug = runtime.settings.debug in ("INFO", "DEBUG")
        self._lanes_open = runtime.settings.lanes and not self._debug  # a lane checks no more than the key
        self._tabled: set[str] = set()  # collectives whose cost table MESHCOMM_DEBUG printed
        self._mailbox = None
        self.seat = Seat(runtime.transport, runtime.store, self.ranks, self.rank, group_id, name, runtime.trace)
        self._plans: dict[tuple, _Plan] = {}  # see _plan
        self.lanes: dict[tuple, object] = {}  # the faces' repeated calls, run in one compiled step (lanes.py)

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

    def collective(self, call: Call, async_op: bool = False) -> Work | None:
        """Run (or queue) one collective on this rank's buffers; a Work when `async_op`."""
        key = (call.problem, call.dtype, call.op, call.algorithm)  # the dtype's name fixes its itemsize
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(key, call.itemsize)
        limit = self.timeout if call.timeout is None else seconds(call.timeout)
        if plan.compiled and not async_op and board_run.compiled_takes(plan.board, call.buffers):
            seq = self._turns.take_now()  # the compiled Turns: look and take in one step under the GIL, no lock
            if seq is not None:
                return self._run_compiled(plan, seq, call, limit)
        run = self._run_as_messages if plan.board is None else self.seat.run
        return self.submit(plan.description, lambda seq: self._recorded(plan, seq, run, call, limit, async_op),
                           async_op)

    def _run_compiled(self, plan: _Plan, seq: int, call: Call, limit: float) -> object:
        """Blocking call `seq` the compiled path runs, with nothing queued before it: what submit does, without the
        queue's bookkeeping (a lock and a closure cost a measurable part of an 8-byte call)."""
        done = self._recorded(plan, seq, self.seat.run_compiled, call, limit, False)
        if (call.lane is not None and (call.finish is None or call.lane[0] in lanes.FINISHED_BY_LANE)
                and call.lane not in self.lanes and self._lanes_open):
            lanes.open_lane(self, call, plan, self._turns)
        return done

    def _recorded(self, plan: _Plan, seq: int, run, call: Call, limit: float, async_op: bool) -> object:
        """Run call `seq` by `run` in the flight recorder; a failure is explained (and passed on to the peers)."""
        recorder = self.runtime.recorder
        record = recorder.start(self.group_name, seq, plan.fingerprint, plan.algorithm, self.ranks)
        try:
            run(plan, seq, call.buffers, call.combine, limit, async_op)
        except Exception as exc:
            recorder.finish(record, exc)
            raise self.runtime.explain_failure(self, seq, record, exc) from None
        recorder.finish(record)
        return call.finish() if call.finish is not None else None

    def _plan(self, key: tuple, itemsize: int) -> _Plan:
        """How this rank runs every call of `key` (problem, dtype, op, algorithm) on elements of `itemsize` bytes:
        all of it is decided alike for each such call, so it is kept for the next one. Not under MESHCOMM_DEBUG,
        where every call is to print its choice."""
        problem, dtype_name, op_name, algorithm = key
        if self.hosts:
            problem = dataclasses.replace(problem, hosts=self.hosts)
        if algorithm is None:
            algorithm = self.algorithm_for(problem, itemsize)
        elif self._debug:
            self._say_choice(problem, itemsize, algorithm, "algorithm=; ")
        fingerprint = fp.pack(problem.collective, dtype_name, op_name, problem.root, problem.payload_elements())
        description = f"{problem.collective} on group {self.group_name!r}"
        if self.seat.fits(problem, itemsize, algorithm):
            on_board = board_run.plan(problem, self.rank, itemsize, algorithm, dtype_name, op_name, fingerprint,
                                      self.runtime.transport.crowded)
            compiled = on_board.native is not None and self.runtime.trace is None
            plan = _Plan(fingerprint, algorithm, description, on_board, None, compiled)
        else:
            plan = _Plan(fingerprint, algorithm, description, None, _schedule(problem, self.rank, algorithm), False)
        if not self._debug:
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _run_as_messages(self, plan: _Plan, seq: int, buffers: dict, combine, timeout: float,
                         overlapped: bool) -> None:
        execution = executor.Execution(
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
        executor.run(execution, self.runtime.transport)

    @property
    def single_copy(self) -> bool:
        """Whether the group's board may take posts by reference: the same answer on every member."""
        return self.seat.single_copy

    # ----- point to point: messages matched by (group, tag) and sender; the mailbox for MPI's matching

    def isend(self, peer: int, payload: memoryview, tag: int) -> MessageWork:
        """Start sending the bytes `payload` (keep them unchanged until the work completes) to group rank `peer`."""
        target = self.ranks[peer]
        handle = self.runtime.transport.isend(target, payload, Key(KIND_P2P, self.group_id, tag, 0))
        return self._message_work("isend to", target, tag, handle)

    def irecv(self, peer: int | None, buffer: memoryview, tag: int,
              finish: Callable[[], object] | None = None) -> MessageWork:
        """Start receiving into the bytes `buffer` from group rank `peer` (None: any rank); the work's
        source_rank() is the sender's global rank."""
        source = None if peer is None else self.ranks[peer]
        handle = self.runtime.transport.irecv(source, buffer, Key(KIND_P2P, self.group_id, tag, 0))
        return self._message_work("irecv from", source, tag, handle, finish, lambda: handle.source)

    def open_message_lane(self, key: tuple, sending: bool, peer: int, tag: int, nbytes: int) -> None:
        """After the Python path sent `nbytes` to (or received them from) group rank `peer`: a lane for the
        face's repeats of that call, `key`, where the transport offers one (lanes.py)."""
        if key not in self.lanes and not self.destroyed and self._lanes_open:
            target = self.ranks[peer]
            words = f"{_describe_message('isend to' if sending else 'irecv from', target, tag)}, {nbytes} B"
            lanes.open_message_lane(self, key, sending, target, Key(KIND_P2P, self.group_id, tag, 0), nbytes, words)

    def _message_work(self, what: str, peer: int | None, tag: int, handle, finish=None, source=None) -> MessageWork:
        transport = self.runtime.transport
        description = _describe_message(what, peer, tag)
        recorder = self.runtime.recorder
        recorded = recorder.start_p2p(self.group_name, f"{description}, {handle.nbytes} B", peer)

        def drive(seconds: float) -> None:
            try:
                transport.wait([handle], timeout=seconds)
            except CommTimeoutError as exc:
                error = CommTimeoutError(f"{description} in group {self.group_name!r}: {exc}")
                recorder.finish(recorded, error)
                raise error from None

        return MessageWork(description, drive, lambda: transport.test(handle), self.timeout, finish,
                           lambda error: recorder.finish(recorded, error), source)

    def algorithm_for(self, problem: Problem, itemsize: int) -> str:
        """The user's MESHCOMM_ALGO choice for this collective, else the tuning file's measured or the model's pick."""
        named = self.runtime.algorithm_override.get(problem.collective)
        if named is None:
            choice = self.chooser.choose(problem, itemsize)
            named = choice.name
            if self._debug:
                self._say_choice(problem, itemsize, named, "" if choice.how == "predicted" else f"{choice.how}; ")
        elif self._debug:
            self._say_choice(problem, itemsize, named, "MESHCOMM_ALGO; ")
        return named

    @property
    def chooser(self) -> Chooser:
        if self._chooser is None:
            labels = self.runtime.transport.link_labels
            self._chooser = Chooser(self.runtime.tuning, self.size, [labels[r] for r in self.ranks],
                                    self.runtime.cores, self.hosts, self.single_copy)
        return self._chooser

    def _say_choice(self, problem: Problem, itemsize: int, name: str, why: str) -> None:
        """MESHCOMM_DEBUG=INFO: the collective's cost table once per group, and this call's algorithm."""
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
            seq, queued = self._turns.take(async_op)
            if queued:
                work = QueuedWork(f"{description} (seq {seq})")
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
                self._turns.done()
            work._finish(error)

    def shutdown(self) -> None:
        self.destroyed = True
        self.lanes.clear()
        if self._queue is not None:
            self._queue.put(None)
            self._worker.join(timeout=5)
        self.seat.close()


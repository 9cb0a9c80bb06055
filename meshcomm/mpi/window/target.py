"""The target side of a window: a thread per window and rank that applies what origins ask of its memory.

MPI lets an origin read and write a target's window while the target's
program is busy elsewhere (passive target: Lock, Put, Unlock). A window's
memory is usually the caller's own (Win.Create), which no other process can
map, so rather than shared pages each rank runs one thread per window (one
design for every flavour and for ranks on other hosts alike; an
Allocate_shared window is shared pages, but its operations come here too).
The thread takes the requests arriving on the window's own communicator,
one at a time, in arrival order (and so in the order each origin sent
them), and applies them to its memory; the rank's requests of its own
window are applied by the calling thread, under the same lock. Doing them
one at a time is what makes Accumulate, Fetch_and_op and Compare_and_swap
atomic on a location. The thread also keeps the window's locks: a lock
request is answered when it is granted.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from meshcomm.errors import CommTimeoutError
from meshcomm.group.mailbox import Message
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import ops
from meshcomm.mpi.window import protocol as P
from meshcomm.mpi.window.memory import Memory

_SLICE = 0.05  # seconds the thread blocks in the transport before looking whether it should stop


class LocalReply:
    """The answer to a request this rank made of its own window, handed over without a message."""

    def __init__(self) -> None:
        self.message: Message | None = None

    @property
    def done(self) -> bool:
        return self.message is not None


class TargetThread:
    """Serves one window's requests on this rank until stopped; the rank's own requests are served inline.

    The thread is also the one that drives the window's mailbox: it sleeps in
    the transport until something arrives, so an answer wakes it at once, and
    it tells the rank's waiting calls (`wait`) after each look. A thread
    waiting in the transport itself would sleep its full slice after another
    thread took its message.
    """

    def __init__(self, mailbox, memory: Memory, name: str, rank: int) -> None:
        self._mailbox = mailbox
        self.memory = memory
        self._rank = rank
        self._lock = threading.Lock()  # one request at a time, from the thread or from this rank's calls
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._exclusive: int | None = None  # the origin holding the exclusive lock
        self._shared: collections.Counter = collections.Counter()  # origin -> shared locks held
        self._waiting: collections.deque = collections.deque()  # (origin, request) asking for a lock
        self._errors: dict[int, tuple[int, str]] = {}  # origin -> the first failure of a request without reply
        self._local: dict[int, LocalReply] = {}  # reply tag -> this rank's own request awaiting its answer
        self._completed: collections.Counter = collections.Counter()  # origin -> its Completes not yet waited for
        self._failure: Exception | None = None  # why the thread stopped serving, if not told to
        self._thread = threading.Thread(target=self._serve, name=f"meshcomm-win-{name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def serve_local(self, request: P.Request, reply: LocalReply | None = None) -> None:
        """Apply this rank's own request now; a failure of one that has no answer is raised here."""
        if reply is not None:
            self._local[request.reply_tag] = reply
        with self._lock:
            self._handle(self._rank, request)
            error = self._errors.pop(self._rank, None)
        if error is not None:
            raise err.Exception(*error)

    def take_completions(self, origins: list[int]) -> bool:
        """True, consuming one Complete of each, once every one of `origins` has completed (Win.Wait, Win.Test)."""
        with self._lock:
            if not all(self._completed[o] for o in origins):
                return False
            self._completed.subtract(origins)
            return True

    def wait(self, done, what: str, timeout: float) -> None:
        """Until `done()`, which the thread's looks at the mailbox (or its inline answers) make true."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                if self._failure is not None:
                    raise err.Exception(err.ERR_OTHER, f"rank {self._rank}: {what}: the window's thread "
                                                       f"stopped: {self._failure}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommTimeoutError(f"rank {self._rank}: {what} did not complete within {timeout:.1f} s")
                self._changed.wait(min(remaining, _SLICE))

    def _serve(self) -> None:
        try:
            self._serve_until_stopped()
        except Exception as exc:  # the transport closed under the window (the job ends): tell the waiters
            self._failure = exc
            with self._changed:
                self._changed.notify_all()

    def _serve_until_stopped(self) -> None:
        mailbox = self._mailbox
        posted = mailbox.recv(None, P.REQUEST_TAG)
        while True:
            if posted.done:
                message = posted.message
                posted = mailbox.recv(None, P.REQUEST_TAG)
                with self._lock:
                    try:
                        self._handle(message.source, P.decode(message.payload))
                    except Exception as exc:  # a malformed request must not stop the window's service
                        self._errors.setdefault(message.source, (_error_class(exc), str(exc)))
                continue
            with self._changed:
                self._changed.notify_all()
            if self._stopping.is_set() and mailbox.cancel(posted):
                return
            mailbox.progress(_SLICE)

    def _handle(self, origin: int, request: P.Request) -> None:
        kind = request.kind
        if kind == P.LOCK:
            self._waiting.append((origin, request))
            self._grant()
            return
        if kind in (P.FLUSH, P.UNLOCK, P.COMPLETE):
            if kind == P.UNLOCK:
                self._release(origin, request.lock)
            elif kind == P.COMPLETE:
                self._completed[origin] += 1
            error = self._errors.pop(origin, None)
            self._answer(origin, request, *(error if error else (0, b"")))
            self._grant()
            return
        try:
            fetched = self._apply(request)
        except Exception as exc:
            if kind in (P.PUT, P.ACCUMULATE):
                self._errors.setdefault(origin, (_error_class(exc), str(exc)))
            else:
                self._answer(origin, request, _error_class(exc), str(exc))
            return
        if fetched is not None:
            self._answer(origin, request, 0, fetched)

    def _apply(self, request: P.Request) -> bytes | None:
        """Carry out a data request on the memory; the bytes to send back, or None for Put and Accumulate."""
        place = self.memory.locate(request.disp, request.nbytes)
        kind = request.kind
        if kind == P.PUT:
            place[...] = np.frombuffer(request.data, dtype=np.uint8)
            return None
        if kind == P.GET:
            return place.tobytes()
        values = place.view(request.dtype)
        old = values.copy()
        if kind == P.COMPARE_AND_SWAP:
            new, compare = np.frombuffer(request.data, dtype=request.dtype).reshape(2, -1)
            if old.tobytes() == compare.tobytes():
                values[...] = new
            return old.tobytes()
        op = getattr(ops, P.OP_NAMES[request.op])
        if op is not ops.NO_OP:
            origin = np.frombuffer(request.data, dtype=request.dtype)
            values[...] = op.combine_arrays(old, origin)
        return old.tobytes() if kind == P.GET_ACCUMULATE else None

    def _answer(self, origin: int, request: P.Request, error_class: int, data) -> None:
        frame = P.reply(error_class, data.encode() if isinstance(data, str) else data)
        if origin != self._rank:
            self._mailbox.send(origin, request.reply_tag, frame)
            return
        self._local.pop(request.reply_tag).message = Message(origin, request.reply_tag, memoryview(frame))
        with self._changed:
            self._changed.notify_all()

    # ----- locks

    def _release(self, origin: int, lock: int) -> None:
        if lock == P.EXCLUSIVE_LOCK and self._exclusive == origin:
            self._exclusive = None
        elif lock == P.SHARED_LOCK and self._shared[origin]:
            self._shared[origin] -= 1
            if not self._shared[origin]:
                del self._shared[origin]

    def _grant(self) -> None:
        """Answer waiting lock requests in arrival order, as long as each is compatible with the locks held."""
        while self._waiting:
            origin, request = self._waiting[0]
            if self._exclusive is not None or (request.lock == P.EXCLUSIVE_LOCK and self._shared):
                return
            self._waiting.popleft()
            if request.lock == P.EXCLUSIVE_LOCK:
                self._exclusive = origin
            else:
                self._shared[origin] += 1
            self._answer(origin, request, 0, b"")


def _error_class(exc: Exception) -> int:
    return exc.Get_error_class() if isinstance(exc, err.Exception) else err.ERR_OTHER

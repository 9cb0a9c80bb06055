"""MPI.Request and its wait/test families (any, all, some; Capitalized for buffers, lowercase return objects).

A request object names an operation, as MPI's handles do: `MPI.Request(req)`
makes a second object naming the same operation, and the two compare equal.
A request drives its group's mailbox when tested or waited on; there is no
background progress. Completing a request makes that object REQUEST_NULL in
place, as in MPI, so lists of requests can be waited on again; a persistent
request (Prequest) becomes inactive instead, ready to be started again.
"""

from __future__ import annotations

import itertools
import time
import weakref

from meshcomm import config
from meshcomm.errors import CommTimeoutError
from meshcomm.group.mailbox import Mailbox
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import status as st
from meshcomm.mpi.handles import BuiltInNew

_SLICE = 0.02
_IDLE_SLICE = 0.001  # how long a wait with no mailbox to drive sleeps between looks

_operations: "weakref.WeakValueDictionary[int, Operation]" = weakref.WeakValueDictionary()
_handle_numbers = itertools.count(1)


class Operation:
    """What a request handle names: one send, receive or started collective, shared by every Request naming it."""

    kind = "request"
    persistent = False

    def __init__(self, mailbox, posted, finish=None, null_source: int = C.ANY_SOURCE) -> None:
        self.mailbox = mailbox
        self.posted = posted  # the mailbox's Work (PostedSend, PostedRecv) or a lane's; None: complete already
        self.finish = finish  # (message or None) -> result object, run once on completion
        self.null_source = null_source  # the source an operation with nothing posted reports (PROC_NULL's)
        self.started = True
        self.handle = next(_handle_numbers)
        _operations[self.handle] = self

    @property
    def active(self) -> bool:
        return self.started

    def ready(self) -> bool:
        """Progress without blocking; True once the operation finished."""
        return self.posted is None or self.posted.is_completed()

    def block(self) -> None:
        if self.posted is not None:
            self.posted.wait()

    def complete(self, into: st.Status):
        """Fill `into` with the finished operation's status and produce its result."""
        posted, self.posted, self.started = self.posted, None, False
        if posted is None:
            st.empty(into, self.null_source)
            return self.finish(None) if self.finish is not None else None
        error = posted.exception()
        if error is not None:
            raise error
        message = getattr(posted, "message", None)
        if getattr(posted, "cancelled", False):
            st.empty(into)
            into.cancelled = True
            return None
        if message is not None:
            into._set(message.source, message.tag, len(message.payload))
        else:
            st.empty(into, self.null_source)
        return self.finish(message) if self.finish is not None else None

    def peek(self, into: st.Status | None) -> None:
        """Fill `into` as completing would, without completing."""
        if into is None:
            return
        message = getattr(self.posted, "message", None)
        if message is not None:
            into._set(message.source, message.tag, len(message.payload))
        else:
            st.empty(into, self.null_source)
            into.cancelled = getattr(self.posted, "cancelled", False)

    def cancel(self) -> None:
        """Withdraw an unmatched receive; sends have already left and cannot be cancelled."""
        if self.posted is not None and hasattr(self.posted, "cancelled"):
            self.mailbox.cancel(self.posted)

    def deadline(self) -> float:
        return self.mailbox.group.timeout if self.mailbox is not None else config.get_float("MESHCOMM_TIMEOUT")

    def pause(self, seconds: float) -> None:
        """Let time pass usefully: drive the transport when there is one."""
        if self.mailbox is not None:
            self.mailbox.progress(seconds)
        else:
            time.sleep(min(seconds, _IDLE_SLICE))


class PersistentOperation(Operation):
    """A persistent request's operation: each start runs `starter` anew; between runs it is inactive."""

    kind = "prequest"
    persistent = True

    def __init__(self, mailbox, starter, finish=None, null_source: int = C.ANY_SOURCE) -> None:
        super().__init__(mailbox, None, finish, null_source)
        self.starter = starter  # () -> the Work of one run, or None when a run has nothing to move
        self.started = False

    def start(self) -> None:
        if self.started:
            raise err.Exception(err.ERR_REQUEST, "Start on a persistent request that is already active; "
                                                 "wait for it (or test it) first")
        self.posted = self.starter()
        self.started = True


class Request(BuiltInNew):
    """A pending operation; falsy once completed (REQUEST_NULL) or freed."""

    _kind: str | None = None  # the operations a subclass may name (None: any)

    def _build(self, request: "Request | Mailbox | None" = None, posted=None, finish=None) -> None:
        if request is None or isinstance(request, Request):
            self._op = None if request is None else self._adopt(request._op)
        elif isinstance(request, Mailbox):
            self._op = Operation(request, posted, finish)
        else:
            raise TypeError(f"{type(self).__name__}() takes a request to copy, got {type(request).__name__}")

    @classmethod
    def _adopt(cls, operation: Operation | None) -> Operation | None:
        if operation is not None and cls._kind is not None and operation.kind != cls._kind:
            raise TypeError(f"a {cls.__name__} cannot name a {operation.kind} (a {type(operation).__name__})")
        return operation

    @classmethod
    def _naming(cls, operation: Operation | None) -> "Request":
        request = cls.__new__(cls)
        request._op = operation
        return request

    @classmethod
    def completed(cls, result=None, source: int = C.ANY_SOURCE) -> "Request":
        """A request that is already done (an operation with PROC_NULL); its status names `source`."""
        return cls._naming(Operation(None, None, lambda _message: result, source))

    def _is_active(self) -> bool:
        return self._op is not None and self._op.active

    def _ready(self) -> bool:
        return self._op.ready()

    def _complete(self, status: st.Status | None):
        """Finish a ready request: fill `status`, produce the result, become REQUEST_NULL (or inactive)."""
        op = self._op
        into = st.Status()
        try:
            result = op.complete(into)
        finally:
            if not op.persistent:
                self._op = None
        if status is not None:
            status._copy_from(into)
        return result

    def _block(self) -> None:
        self._op.block()

    # ----- handles

    @property
    def handle(self) -> int:
        """The number naming this request's operation (0 for REQUEST_NULL)."""
        return 0 if self._op is None else self._op.handle

    @classmethod
    def fromhandle(cls, handle: int) -> "Request":
        if handle == 0:
            return cls._naming(None)
        operation = _operations.get(int(handle))
        if operation is None:
            raise ValueError(f"no request has handle {handle}")
        return cls._naming(cls._adopt(operation))

    def toint(self) -> int:
        return self.handle

    py2f = toint
    fromint = f2py = fromhandle

    # ----- one request

    def Wait(self, status: st.Status | None = None) -> bool:
        Request.wait(self, status)  # not self.wait: a subclass may redefine the lowercase form
        return True

    def wait(self, status: st.Status | None = None):
        if not self._is_active():
            st.empty(status)
            return None
        self._block()
        return self._complete(status)

    def Test(self, status: st.Status | None = None) -> bool:
        return Request.test(self, status)[0]

    def test(self, status: st.Status | None = None):
        if not self._is_active():
            st.empty(status)
            return True, None
        if not self._ready():
            return False, None
        return True, self._complete(status)

    def Get_status(self, status: st.Status | None = None) -> bool:
        """Whether it finished, without completing it."""
        if not self._is_active():
            st.empty(status)
            return True
        ready = self._ready()
        if ready:
            self._op.peek(status)
        return ready

    get_status = Get_status

    def Cancel(self) -> None:
        if self._op is None:
            raise err.Exception(err.ERR_REQUEST, "Cancel on REQUEST_NULL (or a request already completed or freed)")
        if self._is_active():
            self._op.cancel()

    cancel = Cancel

    def Free(self) -> None:
        if self._op is None:
            raise err.Exception(err.ERR_REQUEST, "Free on REQUEST_NULL (or a request already completed or freed)")
        self._op = None

    def free(self) -> None:
        """mpi4py's forgiving Free: nothing to do for a null request."""
        self._op = None

    def __bool__(self) -> bool:
        return self._op is not None

    def __eq__(self, other) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self._op is other._op

    def __hash__(self) -> int:
        return hash(self.handle)

    def __reduce__(self):
        if self._op is None:
            return "REQUEST_NULL" if self is REQUEST_NULL else (type(self), ())
        raise ValueError(f"cannot pickle {type(self).__name__} {self.handle}: an operation lives in its process")

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.{type(self).__name__} {self.handle or 'REQUEST_NULL'}>"

    # ----- many requests

    @staticmethod
    def Waitany(requests, status: st.Status | None = None) -> int:
        return Request.waitany(requests, status)[0]

    @staticmethod
    def waitany(requests, status: st.Status | None = None):
        """(index, result) of one finished request; (UNDEFINED, None) when none is active."""
        deadline = _Deadline(requests, "waitany")
        while True:
            index, flag, result = Request.testany(requests, status)
            if flag:
                return index, result
            deadline.pause()

    @staticmethod
    def Testany(requests, status: st.Status | None = None):
        index, flag, _ = Request.testany(requests, status)
        return index, flag

    @staticmethod
    def testany(requests, status: st.Status | None = None):
        active = [(i, r) for i, r in enumerate(requests) if r._is_active()]
        if not active:
            st.empty(status)
            return C.UNDEFINED, True, None
        for index, request in active:
            if request._ready():
                return index, True, request._complete(status)
        return C.UNDEFINED, False, None

    @staticmethod
    def Get_status_any(requests, status: st.Status | None = None):
        """(index, flag) of a finished request, leaving it to be completed later."""
        active = [(i, r) for i, r in enumerate(requests) if r._is_active()]
        if not active:
            st.empty(status)
            return C.UNDEFINED, True
        return next(((i, True) for i, r in active if r.Get_status(status)), (C.UNDEFINED, False))

    @staticmethod
    def Get_status_all(requests, statuses=None) -> bool:
        if not all(r.Get_status() for r in requests if r._is_active()):
            return False
        if isinstance(statuses, list):
            while len(statuses) < len(requests):
                statuses.append(st.Status())
        for i, request in enumerate(requests):
            if statuses is not None and i < len(statuses):
                request.Get_status(statuses[i])
        return True

    @staticmethod
    def Get_status_some(requests, statuses=None):
        active = [(i, r) for i, r in enumerate(requests) if r._is_active()]
        if not active:
            return None
        ready = [i for i, r in active if r.Get_status()]
        for k, i in enumerate(ready):
            if statuses is not None and k < len(statuses):
                requests[i].Get_status(statuses[k])
        return ready

    get_status_any, get_status_all, get_status_some = Get_status_any, Get_status_all, Get_status_some

    @staticmethod
    def Waitall(requests, statuses=None) -> bool:
        Request.waitall(requests, statuses)
        return True

    @staticmethod
    def waitall(requests, statuses=None) -> list:
        for request in requests:
            if request._is_active():
                request._block()
        return Request._complete_all(requests, statuses)

    @staticmethod
    def Testall(requests, statuses=None) -> bool:
        return Request.testall(requests, statuses)[0]

    @staticmethod
    def testall(requests, statuses=None):
        if not all(r._ready() for r in requests if r._is_active()):
            return False, None
        return True, Request._complete_all(requests, statuses)

    @staticmethod
    def _complete_all(requests, statuses) -> list:
        if isinstance(statuses, list):
            while len(statuses) < len(requests):
                statuses.append(st.Status())
        results = []
        for i, request in enumerate(requests):
            status = statuses[i] if statuses is not None and i < len(statuses) else None
            results.append(request._complete(status) if request._is_active() else st.empty(status))
        return results

    @staticmethod
    def Waitsome(requests, statuses=None):
        return Request.waitsome(requests, statuses)[0]

    @staticmethod
    def waitsome(requests, statuses=None):
        """(indices, results) of the requests that finished, after waiting for at least one."""
        deadline = _Deadline(requests, "waitsome")
        while True:
            indices, results = Request.testsome(requests, statuses)
            if indices is None or indices:
                return indices, results
            deadline.pause()

    @staticmethod
    def Testsome(requests, statuses=None):
        return Request.testsome(requests, statuses)[0]

    @staticmethod
    def testsome(requests, statuses=None):
        """(indices, results) finished now; (None, None) when no request is active."""
        active = [(i, r) for i, r in enumerate(requests) if r._is_active()]
        if not active:
            return None, None
        ready = [(i, r) for i, r in active if r._ready()]
        if statuses is not None:
            while len(statuses) < len(ready):
                statuses.append(st.Status())
        results = [r._complete(statuses[k] if statuses is not None else None) for k, (_, r) in enumerate(ready)]
        return [i for i, _ in ready], results


class Prequest(Request):
    """A persistent request: each Start begins its operation anew; once complete it is inactive, not null."""

    _kind = "prequest"

    def _build(self, request: "Request | Mailbox | None" = None, starter=None, finish=None,
                 null_source: int = C.ANY_SOURCE) -> None:
        if isinstance(request, Mailbox) or (request is None and starter is not None):
            self._op = PersistentOperation(request, starter, finish, null_source)
        else:
            super()._build(request)

    def Start(self) -> None:
        if self._op is None:
            raise err.Exception(err.ERR_REQUEST, "Start on a freed (null) persistent request")
        self._op.start()

    start = Start

    @staticmethod
    def Startall(requests) -> None:
        for request in requests:
            request.Start()

    startall = Startall


class _Deadline:
    """Waiting on several requests: block briefly in one's transport between looks, until the deadline."""

    def __init__(self, requests, what: str) -> None:
        self._what = what
        live = [r._op for r in requests if r._is_active()]
        self._driver = next((op for op in live if op.mailbox is not None), live[0] if live else None)
        self._limit = self._driver.deadline() if self._driver is not None else 0.0
        self._end = time.monotonic() + self._limit

    def pause(self) -> None:
        if time.monotonic() >= self._end:
            raise CommTimeoutError(f"{self._what}: no request completed within {self._limit:.1f} s")
        self._driver.pause(_SLICE)


REQUEST_NULL = Request()

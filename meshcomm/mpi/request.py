"""MPI.Request and its wait/test families (any, all, some; Capitalized for buffers, lowercase return objects).

A request drives its group's mailbox when tested or waited on; there is no
background progress. Completing a request makes it REQUEST_NULL in place,
as in MPI, so lists of requests can be waited on again.
"""

from __future__ import annotations

import time

from meshcomm.errors import CommTimeoutError
from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import status as st

_SLICE = 0.02


class Request:
    """A pending send or receive; falsy once completed or freed."""

    def __init__(self, mailbox=None, posted=None, finish=None, info=None) -> None:
        self._mailbox = mailbox
        self._posted = posted  # the group mailbox's Work (a PostedSend or PostedRecv); None: already complete
        self._finish = finish  # (message or None) -> result object, run once on completion
        self._status = info or st.Status()
        self._result = None
        self._active = mailbox is not None  # MPI.Request() is REQUEST_NULL

    @classmethod
    def completed(cls, result=None, source: int = C.ANY_SOURCE) -> "Request":
        request = cls()
        request._active = True
        st.empty(request._status, source)
        request._result = result
        return request

    def _ready(self) -> bool:
        """Progress without blocking; True once the operation finished."""
        return self._posted is None or self._posted.is_completed()

    def _complete(self, status: st.Status | None):
        """Finish a ready request: fill `status`, produce the result, become REQUEST_NULL."""
        if self._active and self._posted is not None:
            message = getattr(self._posted, "message", None)
            if getattr(self._posted, "cancelled", False):
                self._status.cancelled = True
            elif message is not None:
                self._status._set(message.source, message.tag, len(message.payload))
            else:
                st.empty(self._status)
            if self._finish is not None:
                self._result = self._finish(message)
            self._posted = None
        self._active = False
        if status is not None:
            status._copy_from(self._status)
        return self._result

    def _block(self) -> None:
        if self._posted is not None:
            self._posted.wait()

    # ----- one request

    def Wait(self, status: st.Status | None = None) -> bool:
        self.wait(status)
        return True

    def wait(self, status: st.Status | None = None):
        if not self._active:
            st.empty(status)
            return None
        self._block()
        return self._complete(status)

    def Test(self, status: st.Status | None = None) -> bool:
        return self.test(status)[0]

    def test(self, status: st.Status | None = None):
        if not self._active:
            st.empty(status)
            return True, None
        if not self._ready():
            return False, None
        return True, self._complete(status)

    def Get_status(self, status: st.Status | None = None) -> bool:
        """Whether it finished, without completing it."""
        if not self._active:
            st.empty(status)
            return True
        ready = self._ready()
        if ready and status is not None:
            message = getattr(self._posted, "message", None) if self._posted is not None else None
            if message is not None:
                status._set(message.source, message.tag, len(message.payload))
            else:
                status._copy_from(self._status)
                status.cancelled = getattr(self._posted, "cancelled", False)
        return ready

    get_status = Get_status

    def Cancel(self) -> None:
        """Withdraw an unmatched receive; sends have already left and cannot be cancelled."""
        if self._active and self._posted is not None and hasattr(self._posted, "cancelled"):
            self._mailbox.cancel(self._posted)

    cancel = Cancel

    def Free(self) -> None:
        self._active = False

    free = Free

    def __bool__(self) -> bool:
        return self._active

    def __eq__(self, other) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self is other or (not self._active and not other._active)

    def __hash__(self) -> int:
        return id(self)

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
        active = [(i, r) for i, r in enumerate(requests) if r]
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
        active = [(i, r) for i, r in enumerate(requests) if r]
        if not active:
            st.empty(status)
            return C.UNDEFINED, True
        return next(((i, True) for i, r in active if r.Get_status(status)), (C.UNDEFINED, False))

    @staticmethod
    def Get_status_all(requests, statuses=None) -> bool:
        if not all(r.Get_status() for r in requests if r):
            return False
        for i, request in enumerate(requests):
            if statuses is not None and i < len(statuses):
                request.Get_status(statuses[i])
        return True

    @staticmethod
    def Get_status_some(requests, statuses=None):
        active = [(i, r) for i, r in enumerate(requests) if r]
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
            if request:
                request._block()
        return Request._complete_all(requests, statuses)

    @staticmethod
    def Testall(requests, statuses=None) -> bool:
        return Request.testall(requests, statuses)[0]

    @staticmethod
    def testall(requests, statuses=None):
        if not all(r._ready() for r in requests if r):
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
            results.append(request._complete(status) if request else st.empty(status))
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
        active = [(i, r) for i, r in enumerate(requests) if r]
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

    def __init__(self, mailbox, starter, finish=None) -> None:
        super().__init__(mailbox, None, finish)
        self._starter = starter  # () -> the Work of one run of the operation

    def Start(self) -> None:
        if not self._active:
            raise err.Exception(err.ERR_REQUEST, "Start on a freed persistent request")
        if self._posted is not None:
            raise err.Exception(err.ERR_REQUEST, "Start on a persistent request that is already active; "
                                                 "wait for it (or test it) first")
        self._posted = self._starter()

    start = Start

    @staticmethod
    def Startall(requests) -> None:
        for request in requests:
            request.Start()

    startall = Startall

    def _complete(self, status: st.Status | None):
        if self._posted is None:  # inactive: completing it again returns an empty status
            st.empty(status)
            return None
        result = super()._complete(status)
        self._active = True
        return result


class _Deadline:
    """Waiting on several requests: block briefly in one's transport between looks, until the group's deadline."""

    def __init__(self, requests, what: str) -> None:
        self._requests, self._what = requests, what
        mailbox = next((r._mailbox for r in requests if r and r._mailbox is not None), None)
        self._limit = mailbox.group.timeout if mailbox is not None else 0.0
        self._end = time.monotonic() + self._limit

    def pause(self) -> None:
        if time.monotonic() >= self._end:
            raise CommTimeoutError(f"{self._what}: no request completed within {self._limit:.1f} s")
        for request in self._requests:
            if request and request._mailbox is not None:
                request._mailbox.progress(_SLICE)
                return


REQUEST_NULL = Request()

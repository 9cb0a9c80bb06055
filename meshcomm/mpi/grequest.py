"""MPI.Grequest: generalized requests, whose operation the program itself carries out and completes.

`Grequest.Start(query_fn, free_fn, cancel_fn)` makes a request that waits
and tests like any other; the program calls `Complete()` (or
`complete(obj)`, whose object the lowercase wait and test return) when its
work is done. Completing the request asks `query_fn(status)` for its status
and then calls `free_fn()`; `Cancel()` calls `cancel_fn(completed)`. An
exception in a callback is printed and raised as MPI.Exception, of its own
class when it is one, ERR_OTHER otherwise.
"""

from __future__ import annotations

import sys
import threading
import traceback

from meshcomm.mpi import exceptions as err
from meshcomm.mpi import status as st
from meshcomm.mpi.request import Operation, Request


class GeneralizedOperation(Operation):
    kind = "grequest"

    def __init__(self, query_fn, free_fn, cancel_fn, args, kwargs) -> None:
        super().__init__(None, None)
        self._query, self._free, self._cancel = query_fn, free_fn, cancel_fn
        self._args, self._kwargs = tuple(args or ()), dict(kwargs or {})
        self._done = threading.Event()
        self._result = None

    def mark_complete(self, result=None) -> None:
        if self._done.is_set():
            raise err.Exception(err.ERR_REQUEST, "Complete on a generalized request that is already complete")
        self._result = result
        self._done.set()

    def ready(self) -> bool:
        return self._done.is_set()

    def block(self) -> None:
        limit = self.deadline()
        if not self._done.wait(limit):
            raise err.Exception(err.ERR_PENDING, f"generalized request {self.handle}: nobody called Complete "
                                                 f"within {limit:.1f} s")

    def complete(self, into: st.Status):
        self.started = False
        st.empty(into)
        try:
            if self._query is not None:
                _call(self._query, into, *self._args, **self._kwargs)
        finally:
            if self._free is not None:
                _call(self._free, *self._args, **self._kwargs)
        return self._result

    def peek(self, into: st.Status | None) -> None:
        if into is not None:
            st.empty(into)
            if self._query is not None:
                _call(self._query, into, *self._args, **self._kwargs)

    def cancel(self) -> None:
        if self._cancel is not None:
            _call(self._cancel, self._done.is_set(), *self._args, **self._kwargs)


def _call(callback, *args, **kwargs) -> None:
    """Run a program's callback; its failure is printed and becomes an MPI.Exception, as MPI reports it."""
    try:
        callback(*args, **kwargs)
    except err.Exception as exc:
        traceback.print_exc(file=sys.stderr)
        raise err.Exception(exc.Get_error_class(), f"a generalized request's callback failed: {exc.message}") from exc
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        raise err.Exception(err.ERR_OTHER, f"a generalized request's callback failed: {exc!r}") from exc


class Grequest(Request):
    """A request the program completes itself (MPI_Grequest_start)."""

    _kind = "grequest"

    @classmethod
    def Start(cls, query_fn=None, free_fn=None, cancel_fn=None, args=None, kwargs=None) -> "Grequest":
        for name, fn in (("query_fn", query_fn), ("free_fn", free_fn), ("cancel_fn", cancel_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
        return cls._naming(GeneralizedOperation(query_fn, free_fn, cancel_fn, args, kwargs))

    def Complete(self) -> None:
        """Tell MPI the operation is done; waits and tests then complete the request."""
        if self._op is None:
            raise err.Exception(err.ERR_REQUEST, "Complete on a null generalized request")
        self._op.mark_complete()

    def complete(self, obj=None) -> None:
        """Complete, handing `obj` to whoever completes the request with wait() or test()."""
        if self._op is None:
            raise err.Exception(err.ERR_REQUEST, "complete on a null generalized request")
        self._op.mark_complete(obj)

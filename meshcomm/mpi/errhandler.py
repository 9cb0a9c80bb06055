"""MPI.Errhandler: what happens when Call_errhandler reports an error on a communicator, window or session.

ERRORS_RETURN (every object's handler unless set otherwise, as under
mpi4py) does nothing, so the error reaches the caller as MPI.Exception;
ERRORS_ARE_FATAL and ERRORS_ABORT abort the job; a handler made with
Create_errhandler calls the user's function(obj, errorcode). Every MPI
call of the face raises MPI.Exception whichever handler is set: the handler
runs only through Call_errhandler.
"""

from __future__ import annotations

import os
import sys

from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import Handle, PerObject, Referent

MAX_USER_HANDLERS = 32  # per kind of object, as mpi4py allows


class _Handler(Referent):
    def __init__(self, kind: str, function=None, number: int | None = None, name: str = "") -> None:
        super().__init__(number, name)
        self.kind = kind  # "comm", "win", "session", "file"; "" for the predefined ones, which fit any
        self.function = function
        self.holders = 0  # Errhandler objects from Create_errhandler and Get_errhandler not yet freed


class Errhandler(Handle):
    """An error handler; ERRHANDLER_NULL when it names none."""

    _null_name = "ERRHANDLER_NULL"

    def Free(self) -> None:
        ref = self._ref
        if ref is None:
            raise err.Exception(err.ERR_ERRHANDLER, "this is ERRHANDLER_NULL (or a freed error handler)")
        if self._constant:
            raise err.Exception(err.ERR_ARG, f"cannot free the predefined {ref.name}")
        ref.holders -= 1
        if ref.predefined or ref.holders > 0:
            self._ref = None
        else:
            self._forget()


ERRHANDLER_NULL = Errhandler._naming(None, constant=True)
ERRORS_RETURN = Errhandler._naming(_Handler("", number=1, name="ERRORS_RETURN"), constant=True)
ERRORS_ARE_FATAL = Errhandler._naming(_Handler("", number=2, name="ERRORS_ARE_FATAL"), constant=True)
ERRORS_ABORT = Errhandler._naming(_Handler("", number=3, name="ERRORS_ABORT"), constant=True)

_set_on = PerObject()  # the object's referent (a communicator's group, ...) -> its _Handler


def _abort(obj, errorcode: int) -> None:
    """What the fatal handlers do: tell the other ranks, say why, and leave with the error code."""
    message = f"MPI error {errorcode} ({err._string_or(errorcode, 'unknown error code')}) on {obj!r}"
    print(f"meshcomm.MPI: {message}: aborting", file=sys.stderr, flush=True)
    from meshcomm.mpi import world

    if world.is_initialized():
        from meshcomm.api.init import abort

        abort(message)
    os._exit(errorcode if 0 < errorcode < 256 else 1)


def install(cls: type, kind: str, referent_of) -> None:
    """Give `cls` Create_errhandler and Get/Set/Call_errhandler; referent_of(obj) raises for a null object."""

    def Create_errhandler(klass, errhandler_fn) -> Errhandler:
        """A handler calling errhandler_fn(obj, errorcode) when an error is reported on obj."""
        if not callable(errhandler_fn):
            raise TypeError(f"errhandler_fn must be callable, got {type(errhandler_fn).__name__}")
        live = sum(1 for ref in Errhandler._live.values() if getattr(ref, "kind", "") == kind)
        if live >= MAX_USER_HANDLERS:
            raise RuntimeError(f"cannot create more than {MAX_USER_HANDLERS} user-defined {kind} error handlers; "
                               "free some first")
        ref = _Handler(kind, errhandler_fn)
        ref.holders = 1
        return Errhandler._naming(ref)

    def Get_errhandler(self) -> Errhandler:
        """The installed handler, as a new object to Free when done."""
        ref = _set_on.get(referent_of(self), ERRORS_RETURN._ref)
        ref.holders += 1
        return Errhandler._naming(ref)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        target = referent_of(self)
        if not isinstance(errhandler, Errhandler):
            raise TypeError(f"errhandler must be an MPI.Errhandler, got {type(errhandler).__name__}")
        ref = errhandler._ref
        if ref is None:
            raise err.Exception(err.ERR_ERRHANDLER, "cannot install ERRHANDLER_NULL")
        if ref.kind not in ("", kind):
            raise err.Exception(err.ERR_ARG, f"a {ref.kind} error handler cannot be installed on a {kind}")
        _set_on.set(target, ref)

    def Call_errhandler(self, errorcode: int) -> None:
        """Report `errorcode` on this object to its handler."""
        target = referent_of(self)
        if isinstance(errorcode, bool) or not isinstance(errorcode, int):
            raise TypeError(f"errorcode must be an int, got {type(errorcode).__name__}")
        ref = _set_on.get(target, ERRORS_RETURN._ref)
        if ref.function is not None:
            ref.function(self, errorcode)
        elif ref is not ERRORS_RETURN._ref and errorcode != err.SUCCESS:
            _abort(self, errorcode)

    cls.Create_errhandler = classmethod(Create_errhandler)
    cls.Get_errhandler = Get_errhandler
    cls.Set_errhandler = Set_errhandler
    cls.Call_errhandler = Call_errhandler


def inherit(parent, child) -> None:
    """A new object made from another (Dup) gets its handler, as MPI says."""
    ref = _set_on.get(parent)
    if ref is not None:
        _set_on.set(child, ref)

"""Communicator handles: the number naming a communicator in this process (handle, toint, py2f and back).

A number names the communicator's meshcomm group, so every object over that
group (MPI.Comm(cart), a Cartcomm) has the same one; turning it back gives
an object of the most specific MPI class that gave the number out (a
Cartcomm stays a Cartcomm through Comm.fromint). 0 is COMM_NULL.
"""

from __future__ import annotations

import itertools
import weakref

from meshcomm.mpi.comm import Comm

_numbers: "weakref.WeakKeyDictionary[object, int]" = weakref.WeakKeyDictionary()
_groups: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_classes: "weakref.WeakKeyDictionary[object, type]" = weakref.WeakKeyDictionary()
_next_number = itertools.count(1)


def _mpi_class(comm: Comm) -> type:
    """The class meshcomm.MPI defines that `comm` is (a user's subclass of Cartcomm counts as Cartcomm)."""
    return next(k for k in type(comm).__mro__ if k.__module__.startswith("meshcomm.mpi."))


def _handle(self: Comm) -> int:
    group = self._resolve()
    if group is None:
        return 0
    number = _numbers.get(group)
    if number is None:
        number = _numbers[group] = next(_next_number)
        _groups[number] = group
        _classes[group] = _mpi_class(self)
    elif issubclass(_mpi_class(self), _classes[group]):  # MPI.Comm(x) may have asked before x itself
        _classes[group] = _mpi_class(self)
    return number


def _fromhandle(cls, handle: int) -> Comm:
    if handle == 0:
        return cls()
    group = _groups.get(int(handle))
    if group is None:
        raise ValueError(f"no communicator has handle {handle}")
    named = _classes[group]
    return (cls if issubclass(cls, named) else named)._of(group)


Comm.handle = property(_handle)
Comm.toint = Comm.py2f = _handle
Comm.fromhandle = Comm.fromint = Comm.f2py = classmethod(_fromhandle)

"""What communicators, datatypes and windows carry beside their data: attributes, error handler, info.

Installs the attribute, error-handler and info calls on those classes,
and wraps their Dup and Free so that a duplicate inherits its parent's
error handler and info and copies its attributes, and freeing an object
deletes its attributes, as MPI says; communicators made by Split or
Create inherit the error handler alone. Imported last by meshcomm.mpi, once
every class and its Dup exist.
"""

from __future__ import annotations

import functools

from meshcomm.mpi import attributes, errhandler
from meshcomm.mpi.comm import Comm
from meshcomm.mpi.datatypes import Datatype
from meshcomm.mpi.handles import PerObject
from meshcomm.mpi.info import INFO_NULL, Info

_info_of = PerObject()  # the object's referent -> its hints (a dict)


def _comm_referent(comm):
    return comm._g


def _datatype_referent(datatype):
    return datatype._checked()


def _subclasses(cls: type):
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)


def _wrap_dup(cls: type, referent_of, name: str) -> None:
    original = cls.__dict__[name]
    if getattr(original, "_carries_state", False):
        return

    @functools.wraps(original)
    def dup(self, *args, **kwargs):
        new = original(self, *args, **kwargs)
        parent, child = referent_of(self), referent_of(new)
        errhandler.inherit(parent, child)
        info = kwargs.get("info", args[0] if args else None)
        hints = _info_of.get(parent) if info is None else _hints(info)
        if hints:
            _info_of.set(child, dict(hints))
        try:
            attributes.copy(self, parent, child)
        except Exception:
            new.Free()
            raise
        return new

    dup._carries_state = True
    setattr(cls, name, dup)


def _wrap_constructor(cls: type, referent_of, name: str) -> None:
    """Split, Create and Create_group: the new communicator inherits the parent's error handler (MPI 4.1, 9.3)."""
    original = cls.__dict__[name]
    if getattr(original, "_carries_state", False):
        return

    @functools.wraps(original)
    def construct(self, *args, **kwargs):
        new = original(self, *args, **kwargs)
        if new:
            errhandler.inherit(referent_of(self), referent_of(new))
        return new

    construct._carries_state = True
    setattr(cls, name, construct)


def _wrap_free(cls: type, referent_of, may_free) -> None:
    original = cls.__dict__.get("Free")
    if original is None or getattr(original, "_carries_state", False):
        return

    @functools.wraps(original)
    def free(self, *args, **kwargs):
        if not may_free(self):
            return original(self, *args, **kwargs)  # raises the class's own error
        target = referent_of(self)
        try:
            attributes.delete_all(self, target)
        finally:
            original(self, *args, **kwargs)

    free._carries_state = True
    cls.Free = free


def _hints(info) -> dict[str, str]:
    if not isinstance(info, Info):
        raise TypeError(f"info must be an MPI.Info, got {type(info).__name__}")
    return dict(info.items())


def _install_info(cls: type, referent_of) -> None:
    def Get_info(self) -> Info:
        """The hints in use, as a new Info to Free when done."""
        return Info.Create(_info_of.get(referent_of(self), {}))

    def Set_info(self, info: Info) -> None:
        """Replace the hints (meshcomm acts on none of them; they are kept to be read back)."""
        target = referent_of(self)
        hints = _hints(info) if info != INFO_NULL else {}
        _info_of.set(target, hints)

    cls.Get_info = Get_info
    cls.Set_info = Set_info
    cls.info = property(Get_info, Set_info)


def install() -> None:
    for cls in _subclasses(Comm):
        for name in ("Dup", "Clone", "Dup_with_info"):
            if name in cls.__dict__:
                _wrap_dup(cls, _comm_referent, name)
        for name in ("Split", "Split_type", "Create", "Create_group"):
            if name in cls.__dict__:
                _wrap_constructor(cls, _comm_referent, name)
    _wrap_free(Comm, _comm_referent, lambda comm: not comm._predefined and bool(comm))
    attributes.install(Comm, "comm", _comm_referent)
    errhandler.install(Comm, "comm", _comm_referent)
    _install_info(Comm, _comm_referent)

    if "Dup" in Datatype.__dict__:
        _wrap_dup(Datatype, _datatype_referent, "Dup")
    _wrap_free(Datatype, _datatype_referent, lambda datatype: bool(datatype) and not datatype.is_predefined)
    attributes.install(Datatype, "datatype", _datatype_referent)

    from meshcomm.mpi import datatypes, objmodel
    from meshcomm.mpi.groups import Group

    from meshcomm.mpi.matched import Message

    objmodel.install_handles(Datatype, lambda d: d._t, lambda d, t: setattr(d, "_t", t), datatypes._NULL)
    objmodel.install_handles(Message, lambda m: m._held, lambda m, held: setattr(m, "_held", held), None)
    for cls in (Comm, Datatype, Group, Message):
        objmodel.install_free(cls)

    from meshcomm.mpi import window

    win = getattr(window, "Win", None)
    if win is not None:
        predefined_get = win.Get_attr
        _wrap_free(win, lambda w: w._s, bool)
        attributes.install(win, "win", lambda w: w._s, predefined_get)
        errhandler.install(win, "win", lambda w: w._s)
        if "Get_info" not in win.__dict__:
            _install_info(win, lambda w: w._s)
        objmodel.install_handles(win, lambda w: w._state, lambda w, state: setattr(w, "_state", state), None)
        objmodel.install_free(win)


install()

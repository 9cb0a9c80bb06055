"""Attributes: values a program hangs on communicators, datatypes and windows under keys (keyvals) it creates.

A keyval carries what happens to its attribute when the object is
duplicated (copy_fn: None or False, not copied; True, the same object;
a function, whatever it returns, NotImplemented meaning not copied) and
when the attribute goes (delete_fn, called on Delete_attr, on Set_attr
over an older value, and when the object is freed). An exception in
either is printed and becomes ERR_OTHER, as under mpi4py.

Communicators also answer the predefined keys (TAG_UB, HOST, IO,
WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE, LASTUSEDCODE), with values that
hold for every meshcomm job.
"""

from __future__ import annotations

import itertools
import sys
import threading
import traceback

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.handles import PerObject

TAG_UB, HOST, IO, WTIME_IS_GLOBAL, APPNUM, UNIVERSE_SIZE, LASTUSEDCODE = range(0x64400001, 0x64400008)


class _Keyval:
    def __init__(self, kind: str, copy_fn, delete_fn, nopython: bool) -> None:
        self.kind = kind
        self.freed = False  # Free_keyval: no new uses, but attributes already set still copy and delete
        self.copy_fn = copy_fn
        self.delete_fn = delete_fn
        self.nopython = nopython


_lock = threading.Lock()
_keyvals: dict[int, _Keyval] = {}  # every keyval ever made, freed ones too
_numbers = itertools.count(0x64500001)
_values = PerObject()  # the object's referent -> {keyval: value}


def _communicator_value(comm, keyval: int):
    """A predefined key's value: tags up to TAG_UB, no host rank, every rank can do I/O, one application."""
    if keyval == TAG_UB:
        return C.TAG_UB
    if keyval == HOST:
        return C.PROC_NULL
    if keyval == IO:
        return C.ANY_SOURCE
    if keyval == WTIME_IS_GLOBAL:
        return False  # each rank's Wtime starts at its own import
    if keyval == APPNUM:
        from meshcomm.mpi import spawn

        return spawn.appnum()
    if keyval == UNIVERSE_SIZE:
        from meshcomm.mpi import world

        return world.runtime().world.size
    return err.last_used_code()


_PREDEFINED_BY_KIND = {"comm": (set(range(TAG_UB, LASTUSEDCODE + 1)), _communicator_value)}


def _report(where: str, keyval: int) -> err.Exception:
    """Print the callback's traceback (it would otherwise be lost) and make the MPI error mpi4py raises."""
    traceback.print_exc(file=sys.stderr)
    return err.Exception(err.ERR_OTHER, f"the {where} of keyval {keyval} raised {sys.exc_info()[0].__name__}")


def _callback(fn, name: str):
    if fn is None or isinstance(fn, bool) or callable(fn):
        return fn
    raise TypeError(f"{name} must be callable, True, False or None, got {type(fn).__name__}")


def install(cls: type, kind: str, referent_of, predefined_get=None) -> None:
    """Give `cls` Create_keyval, Free_keyval, Set_attr, Get_attr and Delete_attr.

    referent_of(obj) is what the attributes belong to (a communicator's
    group), raising the right MPI error for a null object; predefined_get,
    when given, answers the keys the class defines itself.
    """

    def keyval_of(k: int) -> _Keyval:
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"keyval must be an int, got {type(k).__name__}")
        entry = _keyvals.get(k)
        if entry is None or entry.freed or entry.kind != kind:
            raise err.Exception(err.ERR_KEYVAL, f"{k} is not a keyval of a {kind} (KEYVAL_INVALID, freed, "
                                                "or made for another kind of object)")
        return entry

    def Create_keyval(klass, copy_fn=None, delete_fn=None, nopython: bool = False) -> int:
        """A new attribute key for this kind of object."""
        entry = _Keyval(kind, _callback(copy_fn, "copy_fn"), _callback(delete_fn, "delete_fn"), bool(nopython))
        with _lock:
            number = next(_numbers)
            _keyvals[number] = entry
        return number

    def Free_keyval(klass, keyval: int) -> int:
        """Retire a key: no further use, but attributes set under it still copy and delete; KEYVAL_INVALID."""
        keyval_of(keyval).freed = True
        return C.KEYVAL_INVALID

    def Get_attr(self, keyval: int):
        """The value set under `keyval`, or None."""
        target = referent_of(self)
        own = _PREDEFINED_BY_KIND.get(kind)
        if own is not None and keyval in own[0]:
            return own[1](self, keyval)
        if predefined_get is not None:
            value = predefined_get(self, keyval)
            if value is not None:
                return value
        keyval_of(keyval)
        return _values.get(target, {}).get(keyval)

    def Set_attr(self, keyval: int, attrval) -> None:
        target = referent_of(self)
        entry = keyval_of(keyval)
        if entry.nopython and (isinstance(attrval, bool) or not isinstance(attrval, int)):
            raise TypeError(f"a nopython keyval holds an int, got {type(attrval).__name__}")
        table = _values.get(target)
        if table is None:
            table = {}
            _values.set(target, table)
        if keyval in table:
            _delete(self, table, keyval, entry)
        table[keyval] = attrval

    def Delete_attr(self, keyval: int) -> None:
        target = referent_of(self)
        entry = keyval_of(keyval)
        table = _values.get(target, {})
        if keyval not in table:
            raise err.Exception(err.ERR_KEYVAL, f"no attribute is set under keyval {keyval}")
        _delete(self, table, keyval, entry)

    cls.Create_keyval = classmethod(Create_keyval)
    cls.Free_keyval = classmethod(Free_keyval)
    cls.Get_attr = Get_attr
    cls.Set_attr = Set_attr
    cls.Delete_attr = Delete_attr


def _delete(obj, table: dict, keyval: int, entry: _Keyval | None) -> None:
    """Remove the attribute, then call its delete_fn (gone even if the callback raises)."""
    value = table.pop(keyval)
    if entry is not None and callable(entry.delete_fn):
        try:
            entry.delete_fn(obj, keyval, value)
        except Exception:
            raise _report("delete_fn", keyval) from None


def copy(parent_obj, parent, child) -> None:
    """Copy the parent's attributes to a duplicate, as their keyvals' copy_fn say (MPI's Dup)."""
    table = _values.get(parent)
    if not table:
        return
    copied = {}
    for keyval, value in list(table.items()):
        entry = _keyvals.get(keyval)
        how = None if entry is None else entry.copy_fn
        if how is True:
            copied[keyval] = value
        elif callable(how):
            try:
                result = how(parent_obj, keyval, value)
            except Exception:
                raise _report("copy_fn", keyval) from None
            if result is not NotImplemented:
                copied[keyval] = result
    if copied:
        _values.set(child, copied)


def delete_all(obj, target) -> None:
    """Delete every attribute of an object being freed, each through its delete_fn; the first error is raised."""
    table = _values.pop(target)
    if not table:
        return
    first = None
    for keyval in list(table):
        try:
            _delete(obj, table, keyval, _keyvals.get(keyval))
        except err.Exception as error:
            first = first or error
    if first is not None:
        raise first

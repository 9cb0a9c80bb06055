"""The handle object model of Info, Errhandler, Session and Op, as mpi4py gives it.

An object names shared state (its referent; None for the null handle), as
an MPI handle does: `MPI.Info(info)` is a second object naming the same
state, and the two compare equal. Handles are small integers of this
process (0 is the null handle); `fromhandle`, `fromint` and `f2py` turn
one back into an object. Objects are unordered, as mpi4py's are, and
predefined ones pickle as themselves.
"""

from __future__ import annotations

import itertools
import weakref


class Referent:
    """Shared state behind handles; `number` is its handle, `name` a predefined constant's name."""

    _numbers = itertools.count(1024)  # below are the predefined handles

    def __init__(self, number: int | None = None, name: str = "") -> None:
        self.number = next(self._numbers) if number is None else number
        self.name = name

    @property
    def predefined(self) -> bool:
        return bool(self.name)


class BuiltInNew:
    """Built in __new__(cls, other=None), as mpi4py's classes are; __init__ does nothing.

    So a subclass's own __new__ may pass up another object than it was
    given (a clone, say), and that object is what the instance names.
    """

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._build(*args, **kwargs)
        return self

    def __init__(self, *args, **kwargs) -> None:
        pass

    def _build(self, *args, **kwargs) -> None:
        raise NotImplementedError


class NamesState(BuiltInNew):
    """Equality, hash and truth of an object that names shared state, as an MPI handle does.

    Two objects of one family are equal when they name the same state; an
    object is true unless it names its family's null state. `_names` is the
    attribute that holds the state, set on the family's base class.
    """

    _names: str
    _null_state: object = None

    @classmethod
    def _family(cls) -> type:
        return next(k for k in cls.__mro__ if "_names" in k.__dict__)

    def __eq__(self, other) -> bool:
        if not isinstance(other, NamesState) or self._family() is not other._family():
            return NotImplemented
        return getattr(self, self._names) is getattr(other, other._names)

    def __ne__(self, other) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        """Hashable, unlike mpi4py's handles, as meshcomm's communicators are: equal objects hash alike."""
        return id(getattr(self, self._names))

    def __bool__(self) -> bool:
        return getattr(self, self._names) is not self._null_state


class Handle(NamesState):
    """Base of the handle classes: equality by referent, integer handles, pickling of constants."""

    _names = "_ref"

    _live: dict[int, Referent]  # handle -> referent, one table per handle class
    _null_name: str  # the module-level name of the null constant (INFO_NULL, ...)
    _free_call = "Free"  # what free() calls on a handle it may free (a Session's is Finalize)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "_null_name" in cls.__dict__:
            cls._live = {}

    def _build(self, other: "Handle | None" = None) -> None:
        if other is not None and not isinstance(other, self._family()):
            raise TypeError(f"{type(self).__name__}() takes another {self._family().__name__}, "
                            f"got {type(other).__name__}")
        self._ref: Referent | None = None if other is None else other._ref
        self._constant = False

    @classmethod
    def _family(cls) -> type:
        return next(k for k in cls.__mro__ if "_null_name" in k.__dict__)

    @classmethod
    def _naming(cls, ref: Referent | None, constant: bool = False) -> "Handle":
        obj = cls.__new__(cls)
        obj._ref, obj._constant = ref, constant
        if ref is not None:
            cls._family()._live[ref.number] = ref
        return obj

    def _forget(self) -> None:
        """Free the referent: every object naming it stops being usable through fromhandle."""
        if self._ref is not None:
            self._family()._live.pop(self._ref.number, None)
        self._ref = None

    @property
    def handle(self) -> int:
        return 0 if self._ref is None else self._ref.number

    def toint(self) -> int:
        return self.handle

    py2f = toint

    @classmethod
    def fromhandle(cls, handle: int) -> "Handle":
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise TypeError(f"handle must be an int, got {type(handle).__name__}")
        if handle == 0:
            return cls()
        ref = cls._family()._live.get(handle)
        if ref is None:
            raise ValueError(f"no live {cls._family().__name__} has handle {handle}")
        return cls._naming(ref)

    fromint = f2py = fromhandle

    def free(self) -> None:
        """Free unless predefined; an object naming a predefined handle just lets go of it."""
        if self._constant:
            return
        if self._ref is not None and self._ref.predefined:
            self._ref = None
            return
        if self._ref is not None:
            getattr(self, self._free_call)()

    def _rebuild_args(self) -> tuple:
        """What `_rebuild` needs to make a new object like this one (a user object's contents)."""
        raise ValueError(f"cannot pickle a user-defined {self._family().__name__}")

    def __reduce__(self):
        if self._constant:
            return self._ref.name if self._ref is not None else self._null_name
        if self._ref is None or self._ref.predefined:
            return _copy_of, (type(self), self._ref.name if self._ref is not None else self._null_name)
        args = self._rebuild_args()
        return type(self)._rebuild, args

    def __repr__(self) -> str:
        name = self._null_name if self._ref is None else self._ref.name or f"handle {self._ref.number}"
        return f"<meshcomm.MPI.{type(self).__name__} {name}>"


def _copy_of(cls: type, constant: str):
    """A new object of `cls` naming the predefined handle `constant` (what pickling such an object gives)."""
    import sys

    return cls(getattr(sys.modules[cls._family().__module__], constant))


class PerObject:
    """Values the MPI face keeps beside objects it does not own (a communicator's group, a datatype).

    Keyed by identity, since those objects may compare equal to others
    (two datatypes of one name); an entry goes when its object is collected.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[object, object]] = {}

    def get(self, obj, default=None):
        entry = self._entries.get(id(obj))
        return default if entry is None else entry[1]

    def set(self, obj, value) -> None:
        key = id(obj)
        try:
            anchor = weakref.ref(obj, lambda _, key=key: self._entries.pop(key, None))
        except TypeError:
            anchor = obj  # not weakly referable: kept alive with its entry
        self._entries[key] = (anchor, value)

    def pop(self, obj, default=None):
        entry = self._entries.pop(id(obj), None)
        return default if entry is None else entry[1]

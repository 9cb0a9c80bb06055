"""mpi4py's handle calls for the face's classes that do not define their own: handle numbers and safe free().

`handle` (and toint, py2f) is a small integer naming the object an
instance refers to, 0 for the null one; fromhandle (fromint, f2py) gives
a new instance referring to it. `free()` is mpi4py's forgiving Free: it
does nothing to a null handle or a predefined constant, lets go of a
predefined object through a copy of its handle, and frees anything else.
Each is installed only where the class has none, so a class's own wins.
"""

from __future__ import annotations

import itertools
import sys


class _Numbers:
    """Handle numbers of one class: the referent behind each, kept while its number may be asked back."""

    def __init__(self) -> None:
        self.by_referent: dict[int, int] = {}
        self.referents: dict[int, object] = {}
        self.next = itertools.count(1)

    def number(self, referent) -> int:
        number = self.by_referent.get(id(referent))
        if number is None:
            number = self.by_referent[id(referent)] = next(self.next)
            self.referents[number] = referent
        return number


def install_handles(cls: type, get_referent, set_referent, null_referent) -> None:
    """handle/toint/py2f and fromhandle/fromint/f2py on `cls`, whose instances name get_referent(obj)."""
    if hasattr(cls, "handle"):
        return
    numbers = _Numbers()

    def handle(self) -> int:
        referent = get_referent(self)
        return 0 if referent is null_referent else numbers.number(referent)

    def fromhandle(klass, number: int):
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"handle must be an int, got {type(number).__name__}")
        obj = klass()
        if number == 0:
            return obj
        referent = numbers.referents.get(number)
        if referent is None:
            raise ValueError(f"no {cls.__name__} has handle {number}")
        set_referent(obj, referent)
        return obj

    cls.handle = property(handle)
    cls.toint = cls.py2f = handle
    cls.fromhandle = cls.fromint = cls.f2py = classmethod(fromhandle)


def _constants_of(cls: type) -> list:
    """The module-level constants of meshcomm.MPI that are instances of `cls` (COMM_WORLD, INT, GROUP_EMPTY...)."""
    face = sys.modules["meshcomm.mpi"]
    return [value for name, value in vars(face).items() if name.isupper() and isinstance(value, cls)]


def install_free(cls: type) -> None:
    """mpi4py's free(): Free, except on null handles and predefined objects, which it leaves alone."""
    if hasattr(cls, "free"):
        return

    def free(self) -> None:
        if not self:
            return
        constants = _constants_of(cls)
        if any(self is constant for constant in constants):
            return
        if any(constant and self == constant for constant in constants):
            type(self)._build(self)  # a copy of a predefined handle: only the copy lets go
            return
        self.Free()

    cls.free = free

"""MPI.buffer: a view of raw memory as bytes (what Alloc_mem and Win.tomemory hand back).

It is a numpy array of uint8 that also answers mpi4py's questions (address,
obj, readonly, format), so `buf[:] = 0`, slicing, len() and the buffer
protocol behave as with mpi4py's buffer. A buffer over no memory at all
(`buffer()`, or what a window exposing none hands back) is at address 0, as
MPI says, also to readers of its array interface such as MPI.Get_address.
"""

from __future__ import annotations

import ctypes

import numpy as np

from meshcomm.mpi import messages as msg


class buffer(np.ndarray):  # noqa: N801 (mpi4py's name: MPI.buffer)
    """Bytes of memory owned by `obj` (any object exposing the buffer protocol)."""

    def __new__(cls, obj=None) -> "buffer":
        if obj is None:
            return cls._nothing()
        readonly = isinstance(obj, bytes) or (isinstance(obj, memoryview) and obj.readonly)
        raw = msg._raw(obj, "obj", writable=False)[0]
        view = cls._over(raw, obj)
        if readonly:
            view.flags.writeable = False
        return view

    @classmethod
    def _over(cls, raw: np.ndarray, obj) -> "buffer":
        view = raw.view(cls)
        view._obj = obj
        return view

    @classmethod
    def _nothing(cls) -> "buffer":
        view = cls._over(np.empty(0, dtype=np.uint8), None)
        view._null = True
        return view

    def __array_finalize__(self, source) -> None:
        self._obj = getattr(source, "_obj", None)
        self._null = getattr(source, "_null", False) and self.size == 0

    @property
    def __array_interface__(self) -> dict:
        interface = super().__array_interface__
        if self._null:
            interface["data"] = (0, interface["data"][1])
        return interface

    @classmethod
    def allocate(cls, nbytes: int, clear: bool = False) -> "buffer":
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        storage = bytearray(max(int(nbytes), 1))  # one byte at least, so even an empty buffer has an address
        return cls._over(np.frombuffer(storage, dtype=np.uint8)[: int(nbytes)], storage)

    @classmethod
    def fromaddress(cls, address: int, nbytes: int, readonly: bool = False) -> "buffer":
        if nbytes == 0:
            return cls._nothing()
        storage = (ctypes.c_ubyte * int(nbytes)).from_address(int(address))
        view = cls._over(np.frombuffer(storage, dtype=np.uint8), storage)
        view.flags.writeable = not readonly
        return view

    @property
    def address(self) -> int:
        return int(self.__array_interface__["data"][0])

    @property
    def obj(self):
        return self._obj

    @property
    def readonly(self) -> bool:
        return not self.flags.writeable

    @property
    def format(self) -> str:
        return "B"

    def __bool__(self) -> bool:
        """True when it holds any bytes, as for a bytearray (not numpy's elementwise truth)."""
        return bool(self.size)

    def toreadonly(self) -> "buffer":
        view = self.view(type(self))
        view.flags.writeable = False
        return view

    def cast(self, format: str, shape=None) -> memoryview:  # noqa: A002 (memoryview's argument name)
        view = memoryview(self).cast("B")
        return view.cast(format) if shape is None else view.cast(format, shape)

    def release(self) -> None:
        """The memory belongs to `obj` and is freed with it; nothing to do."""

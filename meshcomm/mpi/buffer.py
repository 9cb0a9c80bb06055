"""MPI.buffer: a view of raw memory as bytes (what Alloc_mem and Win.tomemory hand back).

It is a numpy array of uint8 that behaves as mpi4py's buffer does: it has
address, obj, readonly and format; it indexes by position and by contiguous
slices only, and takes any bytes-like value on assignment; writing to a
read-only buffer is a TypeError. A buffer over no memory at all (`buffer()`,
or a released one) is at address 0, as MPI says, also to readers of its
array interface such as MPI.Get_address. A buffer over device memory
(DLPack's non-CPU devices, CUDA arrays) refuses reads and writes from this
process with BufferError, as mpi4py's does.

`release()` (and Free_mem) lets go of the memory: the buffer then reports
no address, no bytes and no owner. The numpy array underneath cannot shrink
in place, so views taken before the release still reach the memory, which
lives as long as its owner does.
"""

from __future__ import annotations

import ctypes

import numpy as np

_NO_OBJECT = object()


def _bytes_of(obj, what: str) -> memoryview:
    """The bytes of an object with the buffer protocol, DLPack or an array interface."""
    try:
        view = memoryview(obj)
    except TypeError:
        from meshcomm.mpi.messages import _array_from_interface

        array = _array_from_interface(obj) if obj is not None else None
        if array is None:
            raise TypeError(f"{what} needs an object with the buffer protocol, DLPack or an array interface "
                            f"(bytes, bytearray, a numpy array, ...), got {type(obj).__name__}") from None
        view = memoryview(array)
    if not view.contiguous:
        raise BufferError(f"{what} needs contiguous memory")
    return view


def _on_device(obj) -> bool:
    """Whether `obj` names memory on a device (DLPack's device type other than CPU, or a CUDA array)."""
    if hasattr(obj, "__dlpack_device__"):
        return obj.__dlpack_device__()[0] != 1  # kDLCPU
    return hasattr(obj, "__cuda_array_interface__")


class buffer(np.ndarray):  # noqa: N801 (mpi4py's name: MPI.buffer)
    """Bytes of memory owned by `obj` (any object exposing the buffer protocol)."""

    def __new__(cls, obj=_NO_OBJECT) -> "buffer":
        if obj is _NO_OBJECT:
            return cls._nothing()
        return cls.frombuffer(obj, readonly=_bytes_of(obj, "MPI.buffer()").readonly)

    @classmethod
    def frombuffer(cls, obj, readonly: bool = False) -> "buffer":
        """A buffer over the memory of `obj`; read-only when asked, or when `obj` is."""
        view = _bytes_of(obj, "MPI.buffer.frombuffer()")
        if view.readonly and not readonly:
            raise BufferError(f"a {type(obj).__name__} is read-only; pass readonly=True")
        raw = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, dtype=np.uint8)
        result = cls._over(raw, obj)
        result._device = _on_device(obj)
        if readonly:
            result.flags.writeable = False
        return result

    @classmethod
    def _over(cls, raw: np.ndarray, obj) -> "buffer":
        view = raw.view(cls)
        view._obj = obj
        return view

    @classmethod
    def _nothing(cls) -> "buffer":
        view = cls._over(np.empty(0, dtype=np.uint8), None)
        view._released, view._device = True, False
        return view

    def __array_finalize__(self, source) -> None:
        self._obj = getattr(source, "_obj", None)
        self._device = getattr(source, "_device", False)
        self._released = getattr(source, "_released", False) and self.size == 0

    @property
    def __array_interface__(self) -> dict:
        interface = super().__array_interface__
        if self._released:
            interface["data"] = (0, interface["data"][1])
            interface["shape"] = (0,)
        return interface

    @classmethod
    def allocate(cls, nbytes: int, clear: bool = False) -> "buffer":
        """`nbytes` new bytes (zeroed either way: Python's allocator gives nothing else)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError(f"nbytes must be an int, got {type(nbytes).__name__}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        storage = bytearray(int(nbytes))
        return cls._over(np.frombuffer(storage, dtype=np.uint8), storage)

    @classmethod
    def fromaddress(cls, address: int, nbytes: int, readonly: bool = False) -> "buffer":
        """The `nbytes` bytes at `address`, which the caller keeps alive."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if address == 0 and nbytes > 0:
            raise ValueError(f"address 0 cannot hold {nbytes} bytes")
        if nbytes == 0:
            return cls._nothing()
        storage = (ctypes.c_ubyte * int(nbytes)).from_address(int(address))
        view = cls._over(np.frombuffer(storage, dtype=np.uint8), storage)
        view.flags.writeable = not readonly
        return view

    # ----- what mpi4py's buffer reports

    @property
    def address(self) -> int:
        return int(self.__array_interface__["data"][0])

    @property
    def obj(self):
        return None if self._released else self._obj

    @property
    def nbytes(self) -> int:
        return 0 if self._released else super().nbytes

    @property
    def readonly(self) -> bool:
        return not self._released and not self.flags.writeable

    @property
    def format(self) -> str:
        return "B"

    def __len__(self) -> int:
        return 0 if self._released else super().__len__()

    def __bool__(self) -> bool:
        """True when it holds any bytes, as for a bytearray (not numpy's elementwise truth)."""
        return bool(self.nbytes)

    def release(self) -> None:
        """Let go of the memory: address, size and owner read as none afterwards."""
        self._released, self._obj = True, None

    def toreadonly(self) -> "buffer":
        view = self.view(type(self))
        view.flags.writeable = False
        return view

    def tobytes(self, order=None) -> bytes:
        """The bytes; `order` is accepted and ignored, as for mpi4py's buffer (one dimension has one order)."""
        self._on_host("tobytes")
        return np.ndarray.tobytes(self)

    def cast(self, format: str, shape=None) -> memoryview:  # noqa: A002 (memoryview's argument name)
        self._on_host("cast")
        view = memoryview(self).cast("B")
        return view.cast(format) if shape is None else view.cast(format, shape)

    # ----- indexing: positions and contiguous slices, as mpi4py's buffer allows

    def _on_host(self, what: str) -> None:
        if self._device:
            raise BufferError(f"{what} reads device memory, which this process cannot address; "
                              f"messages still move it")

    def _checked_key(self, key):
        self._on_host("indexing")
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise IndexError(f"a buffer takes contiguous slices only, got step {key.step}")
            return key
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -len(self) <= key < len(self):
                raise IndexError(f"index {key} is out of range for a buffer of {len(self)} bytes")
            return key
        raise TypeError(f"a buffer is indexed by an int or a slice, got {type(key).__name__}")

    def __getitem__(self, key):
        return super().__getitem__(self._checked_key(key))

    def __setitem__(self, key, value) -> None:
        key = self._checked_key(key)
        if not self.flags.writeable:
            raise TypeError("this buffer is read-only")
        if isinstance(key, slice) and not isinstance(value, (int, np.integer)):
            view = _bytes_of(value, "assignment to a buffer slice")
            value = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, dtype=np.uint8)
            if value.size != len(range(*key.indices(len(self)))):
                raise ValueError(f"cannot put {value.size} bytes into a slice of "
                                 f"{len(range(*key.indices(len(self))))}")
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        raise NotImplementedError("a buffer has a fixed size; its bytes cannot be deleted")

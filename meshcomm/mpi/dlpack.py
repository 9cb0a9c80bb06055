"""Reading a DLPack capsule's memory as a numpy array, without consuming the capsule.

The capsule stays owned by its producer: the array keeps it alive, and the
producer's own destructor releases the memory once, when the array is gone
(handing it to numpy.from_dlpack would make numpy release it too).
"""

from __future__ import annotations

import ctypes

import numpy as np


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):
    """DLPack 1.x's capsule contents: a version and flags ahead of the tensor."""

    _fields_ = [
        ("version", _Version),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _Tensor),
    ]


_CPU = 1
_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Holder:
    """What numpy sees: an array interface, and the capsule kept alive alongside it."""

    def __init__(self, interface: dict, capsule) -> None:
        self.__array_interface__ = interface
        self.capsule = capsule


def _device(obj) -> int:
    """The DLPack device type `obj.__dlpack_device__()` names (CPU when it has none)."""
    if not hasattr(obj, "__dlpack_device__"):
        return _CPU
    device = obj.__dlpack_device__()  # TypeError when it is not callable
    if not isinstance(device, tuple):
        raise TypeError(f"__dlpack_device__() must return a (device type, device id) tuple, got {device!r}")
    if len(device) != 2:
        raise ValueError(f"__dlpack_device__() must return 2 items, got {len(device)}")
    if not all(isinstance(item, int) for item in device):
        raise TypeError(f"__dlpack_device__() must return two ints, got {device!r}")
    return device[0]


def _capsule(obj, device: int):
    """The capsule `obj.__dlpack__()` hands out, asking for a versioned one where the producer knows how."""
    stream = None if device == _CPU else -1  # -1: the producer needs not synchronize with any stream
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        capsule = obj.__dlpack__(stream=stream)
    if capsule is None:
        raise BufferError(f"{type(obj).__name__}.__dlpack__() returned None")
    return capsule


def _tensor(capsule) -> tuple[_Tensor, bool]:
    """(the tensor a capsule holds, whether it is read-only); BufferError for a used or foreign capsule."""
    if _is_valid(capsule, b"dltensor_versioned"):
        managed = _ManagedVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))
        if managed.version.major != 1:
            raise BufferError(f"DLPack version {managed.version.major}.{managed.version.minor} is not supported")
        return managed.dl_tensor, bool(managed.flags & _READ_ONLY)
    if _is_valid(capsule, b"dltensor"):
        return _Tensor.from_address(_get_pointer(capsule, b"dltensor")), False
    raise BufferError("the DLPack capsule was already used, or is not a DLPack tensor")


def _layout(tensor: _Tensor, itemsize: int) -> tuple[int, ...]:
    """The tensor's shape, after checking that it is contiguous (C or Fortran order)."""
    if tensor.ndim < 0:
        raise BufferError(f"DLPack tensor with ndim {tensor.ndim}")
    if tensor.ndim and not tensor.shape:
        raise BufferError("DLPack tensor without a shape")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if any(n < 0 for n in shape):
        raise BufferError(f"DLPack tensor with shape {shape}")
    if tensor.ndim and tensor.strides:
        strides = tuple(tensor.strides[i] for i in range(tensor.ndim))
        if any(s < 0 for s in strides) or not (_packed(shape, strides) or _packed(shape[::-1], strides[::-1])):
            raise BufferError(f"DLPack tensor with shape {shape} and strides {strides} is not contiguous")
    return shape


def _packed(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major with unit element stride, ignoring dimensions of length 1."""
    expected = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True


def as_array(obj) -> np.ndarray:
    """A flat numpy view of `obj.__dlpack__()`; BufferError for tensors a message cannot use.

    meshcomm moves host memory only: like an MPI built without GPU support,
    it reads a device tensor's pointer as a host address. Element types
    numpy has no name for (opaque handles, several lanes) are viewed as
    their bytes.
    """
    capsule = _capsule(obj, _device(obj))
    tensor, readonly = _tensor(capsule)
    itemsize = tensor.dtype.bits * tensor.dtype.lanes // 8
    shape = _layout(tensor, itemsize)
    kind, lanes = _KINDS.get(tensor.dtype.code), tensor.dtype.lanes
    if kind == "f" and lanes == 2:  # complex numbers as two float lanes
        kind, lanes = "c", 1
    if kind is None or lanes != 1:
        typestr = f"|V{itemsize}"
    else:
        typestr = "|b1" if kind == "b" else f"{'<' if np.little_endian else '>'}{kind}{itemsize}"
    count = int(np.prod(shape, dtype=np.int64))
    interface = {
        "version": 3,
        "shape": (count,),
        "typestr": typestr,
        "data": ((tensor.data or 0) + tensor.byte_offset, readonly),
    }
    array = np.asarray(_Holder(interface, capsule))
    return array.view(np.uint8) if typestr.startswith("|V") else array

"""Reading a DLPack capsule's host memory as a numpy array, without consuming the capsule.

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


_CPU = 1
_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Holder:
    """What numpy sees: an array interface, and the capsule kept alive alongside it."""

    def __init__(self, interface: dict, capsule) -> None:
        self.__array_interface__ = interface
        self.capsule = capsule


def as_array(obj) -> np.ndarray:
    """A numpy view of `obj.__dlpack__()`; TypeError for device memory or a layout numpy cannot view."""
    capsule = obj.__dlpack__()
    tensor = _Tensor.from_address(_get_pointer(capsule, b"dltensor"))
    if tensor.device.device_type != _CPU:
        raise TypeError(f"{type(obj).__name__} lives on DLPack device {tensor.device.device_type}; meshcomm moves host memory")
    kind, lanes = _KINDS.get(tensor.dtype.code), tensor.dtype.lanes
    if kind == "f" and lanes == 2:  # complex numbers as two float lanes
        kind, lanes = "c", 1
    if kind is None or lanes != 1:
        raise TypeError(f"{type(obj).__name__} has DLPack dtype code {tensor.dtype.code} with "
                        f"{tensor.dtype.lanes} lanes, which numpy cannot view")
    itemsize = tensor.dtype.bits * tensor.dtype.lanes // 8
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    typestr = "|b1" if kind == "b" else f"{'<' if np.little_endian else '>'}{kind}{itemsize}"
    strides = None
    if tensor.strides:
        strides = tuple(tensor.strides[i] * itemsize for i in range(tensor.ndim))
    interface = {
        "version": 3,
        "shape": shape,
        "typestr": typestr,
        "data": ((tensor.data or 0) + tensor.byte_offset, False),
        "strides": strides,
    }
    return np.asarray(_Holder(interface, capsule))

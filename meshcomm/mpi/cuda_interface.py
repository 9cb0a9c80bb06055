"""Reading a __cuda_array_interface__ dict as a numpy array of host memory, checked the way mpi4py checks it.

meshcomm moves host memory only: like an MPI built without GPU support, it
reads the interface's pointer as a host address. Each malformed field is
reported as mpi4py reports it: KeyError when a required key is missing,
TypeError for a value of the wrong type, ValueError for a wrong value,
BufferError for memory a message cannot use (masked, non-native byte
order, negative shape, non-contiguous).
"""

from __future__ import annotations

import ctypes
import sys
import warnings

import numpy as np

_NATIVE = "<" if sys.byteorder == "little" else ">"


def _ints(value, key: str) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
        raise TypeError(f"__cuda_array_interface__[{key!r}] must be a tuple of ints, got {value!r}")
    return value


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """C or Fortran order, ignoring the strides of dimensions of length 1."""
    def packed(order):
        expected = itemsize
        for n, stride in order:
            if n != 1 and stride != expected:
                return False
            expected *= n
        return True

    pairs = list(zip(shape, strides))
    return packed(reversed(pairs)) or packed(pairs)


def as_array(interface) -> np.ndarray:
    """The memory a __cuda_array_interface__ dict describes, as a flat numpy array of its elements."""
    if not isinstance(interface, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, got {type(interface).__name__}")
    data = interface["data"]
    if not isinstance(data, tuple):
        raise TypeError(f"__cuda_array_interface__['data'] must be a tuple, got {type(data).__name__}")
    if len(data) != 2:
        raise ValueError(f"__cuda_array_interface__['data'] must be (pointer, read-only flag), got {data!r}")
    address, readonly = data
    if not isinstance(address, int):
        raise TypeError(f"__cuda_array_interface__['data'][0] must be an int pointer, got {address!r}")
    typestr, shape = interface["typestr"], interface["shape"]
    if not isinstance(typestr, str):
        raise TypeError(f"__cuda_array_interface__['typestr'] must be a str, got {typestr!r}")
    shape = _ints(shape, "shape")
    strides = interface.get("strides")
    if strides is not None:
        strides = _ints(strides, "strides")
    descr = interface.get("descr")
    if descr is not None and not isinstance(descr, list):
        raise TypeError(f"__cuda_array_interface__['descr'] must be a list, got {descr!r}")
    if interface.get("mask") is not None:
        raise BufferError("__cuda_array_interface__ with a mask cannot be sent or received")
    if typestr[:1] not in ("|", "=", _NATIVE):
        raise BufferError(f"__cuda_array_interface__['typestr'] {typestr!r} is not in native byte order")
    try:
        dtype = np.dtype("=" + typestr[1:])
    except TypeError:
        raise ValueError(f"__cuda_array_interface__['typestr'] {typestr!r} is not a valid type string") from None
    if descr is not None and dtype.kind == "V" and len(descr) > 1:
        warnings.warn("__cuda_array_interface__['descr'] is ignored: the elements move as raw bytes",
                      RuntimeWarning, stacklevel=4)
    if any(n < 0 for n in shape):
        raise BufferError(f"__cuda_array_interface__['shape'] {shape} has a negative length")
    if strides is not None and (len(strides) != len(shape) or not _contiguous(shape, strides, dtype.itemsize)):
        raise BufferError(f"__cuda_array_interface__ with shape {shape} and strides {strides} is not contiguous")
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8 if dtype.kind == "V" else dtype)
    array = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address)).view(dtype)
    array.flags.writeable = not readonly
    return array.view(np.uint8) if dtype.kind == "V" else array

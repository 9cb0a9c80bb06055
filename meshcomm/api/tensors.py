"""Turning what users pass (numpy arrays, torch CPU tensors) into flat contiguous numpy buffers.

torch tensors are used zero-copy through `.numpy()`; bfloat16 and float8
(no numpy dtype) travel as their raw bits and are reduced by the executor in
float32. A non-contiguous argument, or a torch tensor on an accelerator (CUDA
and others: staged through host memory), is worked on in a contiguous CPU
copy that is written back when the operation completes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from meshcomm.executor import narrow_floats


@dataclass(slots=True)
class Buffer:
    flat: np.ndarray  # 1-D contiguous view (or copy) of the user's data
    dtype_name: str  # the user-visible dtype, e.g. "float32", "bfloat16"
    logical: str | None  # "bfloat16", "float8_e4m3fn", ... when flat holds raw bits
    writeback: Callable[[], None] | None  # copies flat back into a non-contiguous original

    @property
    def count(self) -> int:
        return self.flat.size

    def finish(self) -> None:
        if self.writeback is not None:
            self.writeback()


def _is_torch_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def as_buffer(obj: Any, name: str, writable: bool = False) -> Buffer:
    """A flat view of `obj`; TypeError/ValueError naming `name` for what cannot be sent."""
    if isinstance(obj, np.ndarray):
        return _numpy_buffer(obj, name, writable)
    if _is_torch_tensor(obj):
        return _torch_buffer(obj, name, writable)
    raise TypeError(f"{name} must be a numpy.ndarray or torch.Tensor, got {type(obj).__name__}")


_ACCEPTED: dict[np.dtype, tuple[str, str | None]] = {}  # dtype -> (name, logical) for the dtypes meshcomm sends


def _numpy_buffer(array: np.ndarray, name: str, writable: bool) -> Buffer:
    # numpy computes dtype.name in Python each time; it is on every call's path.
    accepted = _ACCEPTED.get(array.dtype)
    if accepted is None:
        dtype_name = array.dtype.name
        logical = dtype_name if dtype_name in narrow_floats.NARROW else None  # ml_dtypes' bfloat16, float8
        if array.dtype.kind not in "biufc" and logical is None:
            raise TypeError(f"{name} has dtype {array.dtype}, which meshcomm cannot send (numeric and bool only)")
        accepted = _ACCEPTED[array.dtype] = (dtype_name, logical)
    dtype_name, logical = accepted
    flags = array.flags  # made anew on each access: looked at once
    if writable and not flags.writeable:
        raise ValueError(f"{name} is read-only, but this operation writes its result into it")
    storage = array.view(narrow_floats.storage(logical)) if logical else array
    if flags.c_contiguous:
        return Buffer(storage if storage.ndim == 1 else storage.reshape(-1), dtype_name, logical, None)
    copy = np.ascontiguousarray(storage)

    def writeback() -> None:
        storage[...] = copy

    return Buffer(copy.reshape(-1), dtype_name, logical, writeback if writable else None)


# torch dtype -> (name, logical, the bits' torch dtype or None) for the dtypes meshcomm sends
_TORCH_ACCEPTED: dict[Any, tuple[str, str | None, Any]] = {}


def _torch_kind(dtype, name: str) -> tuple[str, str | None, Any]:
    import torch

    accepted = _TORCH_ACCEPTED.get(dtype)
    if accepted is None:
        dtype_name = str(dtype).removeprefix("torch.")
        logical = dtype_name if dtype_name in narrow_floats.NARROW else None
        if logical is not None:
            bits = torch.int16 if logical == "bfloat16" else torch.uint8
        elif dtype.is_complex or dtype.is_floating_point or dtype in _TORCH_INTEGRAL:
            bits = None
        else:
            raise TypeError(f"{name} has dtype {dtype}, which meshcomm cannot send")
        accepted = _TORCH_ACCEPTED[dtype] = (dtype_name, logical, bits)
    return accepted


def _torch_buffer(tensor, name: str, writable: bool) -> Buffer:
    import torch

    if tensor.layout is not torch.strided:  # sparse layouts among them
        raise TypeError(f"{name} has layout {tensor.layout}; meshcomm sends dense (strided) tensors")
    dtype_name, logical, bits = _torch_kind(tensor.dtype, name)

    def view(t):
        if bits is None:
            return t.numpy()
        return t.view(bits).numpy().view(narrow_floats.storage(logical))

    # Every small call passes here: detach only what tracks gradients, ask is_cpu rather than device.type.
    source = tensor.detach() if tensor.requires_grad else tensor
    if source.is_cpu and source.is_contiguous():
        flat = view(source)
        return Buffer(flat if flat.ndim == 1 else flat.reshape(-1), dtype_name, logical, None)
    if source.device.type == "meta":
        raise ValueError(f"{name} is on device meta, which holds no data to send")
    # .cpu() waits for the device's pending work on the tensor, and copy_ below writes the result back.
    copy = source.contiguous() if source.is_cpu else source.cpu().contiguous()

    def writeback() -> None:
        with torch.no_grad():
            tensor.copy_(copy)

    return Buffer(view(copy).reshape(-1), dtype_name, logical, writeback if writable else None)


class _LazyTorchIntegral:
    def __contains__(self, dtype) -> bool:
        import torch

        return dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                         torch.uint16, torch.uint32, torch.uint64)


_TORCH_INTEGRAL = _LazyTorchIntegral()


_NUMPY_VIEWED: set = set()  # the torch dtypes whose CPU tensors .numpy() views (made at the first torch tensor)


def tensor_array(obj: Any) -> np.ndarray | None:
    """The numpy array a lane (group/lanes.py) works on for a CPU torch tensor: its memory as numpy views it.
    None for anything else, which takes the face's whole path (a face checks for a numpy array first)."""
    torch = sys.modules.get("torch")
    if torch is None or type(obj) is not torch.Tensor:
        return None
    if obj.dtype not in (_NUMPY_VIEWED or numpy_viewed_dtypes(torch)):
        return None
    try:  # torch's own checks, in C++, are cheaper than asking: another device or layout, conj or neg bits
        return (obj.detach() if obj.requires_grad else obj).numpy()
    except (TypeError, RuntimeError):
        return None  # what .numpy() refuses: the whole path names it


def numpy_viewed_dtypes(torch) -> set:
    """The torch dtypes whose CPU tensors a lane takes, through .numpy() (tensor_array)."""
    if not _NUMPY_VIEWED:
        _NUMPY_VIEWED.update((torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                              torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128))
    return _NUMPY_VIEWED


def same_dtype(a: Buffer, b: Buffer, what: str) -> None:
    if a.dtype_name != b.dtype_name:
        raise TypeError(f"{what}: dtypes differ, {a.dtype_name} and {b.dtype_name}")
    if a.flat.dtype.isnative != b.flat.dtype.isnative:  # the same name, and bytes that mean other numbers
        raise TypeError(f"{what}: byte orders differ, {_byte_order(a)} and {_byte_order(b)} {a.dtype_name}")


def _byte_order(buffer: Buffer) -> str:
    other = {"little": "big", "big": "little"}[sys.byteorder]
    return f"{sys.byteorder if buffer.flat.dtype.isnative else other}-endian"

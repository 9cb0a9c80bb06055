"""Message specifications: what Capitalized calls accept as a buffer, read into numpy views.

A message is `buf`, `[buf, datatype]`, `[buf, count, datatype]`,
`[buf, (count, displ), datatype]` or `[buf, count, displ, datatype]`; a
vector message (the v-collectives) gives counts and displacements per rank
instead (an int count means the same count for every rank, an int
displacement a stride). `buf` is anything exposing the buffer protocol (numpy arrays,
array.array, bytearray, ...) or None for an empty message. The views share
memory with `buf`, so receiving into them fills the caller's buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshcomm.mpi import datatypes as dt
from meshcomm.mpi import exceptions as err


class _InPlace:
    def __repr__(self) -> str:
        return "MPI.IN_PLACE"


class _Bottom:
    def __repr__(self) -> str:
        return "MPI.BOTTOM"


IN_PLACE = _InPlace()
BOTTOM = _Bottom()


@dataclass
class Spec:
    array: np.ndarray  # 1-D view of the message's elements
    datatype: dt.Datatype


@dataclass
class VectorSpec:
    whole: np.ndarray  # 1-D view of the whole buffer in elements of the datatype
    counts: list[int]
    displs: list[int]
    datatype: dt.Datatype

    def piece(self, rank: int) -> np.ndarray:
        return self.whole[self.displs[rank] : self.displs[rank] + self.counts[rank]]


def _raw(buf, name: str, writable: bool) -> tuple[np.ndarray, np.dtype | None]:
    """(the bytes of buf as a uint8 view, the element dtype buf declares, if any)."""
    if buf is None or buf is BOTTOM:
        return np.empty(0, dtype=np.uint8), None
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise err.Exception(err.ERR_BUFFER, f"{name} must be a contiguous array")
        if writable and not buf.flags.writeable:
            raise err.Exception(err.ERR_BUFFER, f"{name} is read-only, but this call writes into it")
        return buf.reshape(-1).view(np.uint8), buf.dtype
    try:
        view = memoryview(buf)
    except TypeError:
        array = _array_from_interface(buf)
        if array is None:
            raise TypeError(f"{name} must expose the buffer protocol, DLPack or an array interface "
                            f"(numpy array, bytearray, ...), got {type(buf).__name__}") from None
        return _raw(array, name, writable)
    if not view.c_contiguous:
        raise err.Exception(err.ERR_BUFFER, f"{name} must be contiguous")
    if writable and view.readonly:
        raise err.Exception(err.ERR_BUFFER, f"{name} is read-only, but this call writes into it")
    try:
        declared = np.dtype(view.format)
    except TypeError:
        declared = None
    raw = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, dtype=np.uint8)
    return raw, declared


class _HostInterface:
    """Presents a __cuda_array_interface__ to numpy as host memory."""

    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = {**interface, "version": 3}


def _array_from_interface(buf) -> np.ndarray | None:
    """numpy's view of a DLPack or array-interface object; None if it offers neither.

    meshcomm moves host memory only: like an MPI built without GPU support, it
    reads a __cuda_array_interface__ pointer as a host address.
    """
    if hasattr(buf, "__dlpack__"):
        from meshcomm.mpi import dlpack

        return dlpack.as_array(buf)
    if hasattr(buf, "__array_interface__"):
        return np.asarray(buf)
    interface = getattr(buf, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        return np.asarray(_HostInterface(interface))
    return None


def _elements(raw: np.ndarray, datatype: dt.Datatype, name: str) -> np.ndarray:
    size = datatype.Get_size()
    if raw.size % size:
        raise ValueError(f"{name} holds {raw.size} bytes, not a whole number of {datatype.name}")
    return raw.view(datatype.dtype) if raw.size else np.empty(0, dtype=datatype.dtype)


def _split(spec, name: str):
    """(buf, count-ish items..., datatype or None) from a list/tuple spec, or the bare buffer."""
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 4:
            raise ValueError(f"{name} must be buf, [buf, datatype], [buf, count, datatype] or "
                             f"[buf, (count, displ), datatype]; got a sequence of {len(spec)} items")
        items = list(spec)
        datatype = None
        if len(items) > 1 and isinstance(items[-1], (dt.Datatype, str)):
            datatype = items.pop()
        return items[0], items[1:], datatype
    return spec, [], None


def _datatype_of(datatype, declared: np.dtype | None) -> dt.Datatype:
    if datatype is not None:
        return dt.resolve(datatype)
    if declared is None:
        return dt.PREDEFINED["BYTE"]
    return dt.from_dtype(declared)


def _parse(spec, name: str, writable: bool):
    """(every element of the buffer, the sizes part of the spec, its Datatype) of a message specification."""
    buf, sizes, datatype = _split(spec, name)
    raw, declared = _raw(buf, name, writable)
    datatype = _datatype_of(datatype, declared)
    return _elements(raw, datatype, name), sizes, datatype


def read_spec(spec, name: str, writable: bool = False) -> Spec:
    """The elements a message specification names, as a 1-D numpy view of the caller's buffer."""
    whole, sizes, datatype = _parse(spec, name, writable)
    count, displ = None, 0
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        count, displ = sizes[0]
    elif len(sizes) == 1:
        count = sizes[0]
    elif len(sizes) == 2:
        count, displ = sizes
    if count is None:
        return Spec(whole, datatype)
    count, displ = int(count), int(displ or 0)
    if count < 0 or displ < 0 or displ + count > whole.size:
        raise ValueError(f"{name}: count {count} at displacement {displ} does not fit "
                         f"a buffer of {whole.size} {datatype.name}")
    return Spec(whole[displ : displ + count], datatype)


def read_vector(spec, name: str, nranks: int, writable: bool = False) -> VectorSpec:
    """A v-collective's buffer: counts and displacements per rank (default: equal consecutive pieces)."""
    whole, sizes, datatype = _parse(spec, name, writable)
    counts = displs = None
    if len(sizes) == 1 and isinstance(sizes[0], tuple) and len(sizes[0]) == 2:
        counts, displs = sizes[0]
    elif len(sizes) == 1:
        counts = sizes[0]
    elif len(sizes) == 2:
        counts, displs = sizes
    if counts is None:
        if whole.size % nranks:
            raise err.Exception(err.ERR_COUNT, f"{name}: {whole.size} elements do not split evenly over {nranks} ranks")
        counts = [whole.size // nranks] * nranks
    elif _is_int(counts):
        counts = [int(counts)] * nranks
    counts = [int(c) for c in counts]
    if len(counts) != nranks:
        raise err.Exception(err.ERR_COUNT, f"{name}: {len(counts)} counts for {nranks} ranks")
    if displs is None:
        displs = [sum(counts[:r]) for r in range(nranks)]
    elif _is_int(displs):  # a stride: rank r's piece starts at r * displs
        displs = [int(displs) * r for r in range(nranks)]
    displs = [int(d) for d in displs]
    for r in range(nranks):
        if counts[r] < 0 or displs[r] < 0 or displs[r] + counts[r] > whole.size:
            raise err.Exception(err.ERR_COUNT, f"{name}: count {counts[r]} at displacement {displs[r]} for rank {r} "
                                               f"does not fit a buffer of {whole.size} {datatype.name}")
    return VectorSpec(whole, counts, displs, datatype)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

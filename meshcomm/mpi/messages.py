"""Message specifications: what Capitalized calls accept as a buffer, read into numpy views.

A message is `buf`, `[buf, datatype]`, `[buf, count, datatype]`,
`[buf, (count, displ), datatype]` or `[buf, count, displ, datatype]`; a
vector message (the v-collectives) gives counts and displacements per rank
instead (an int count means the same count for every rank, an int
displacement a stride). `buf` is anything exposing the buffer protocol (numpy arrays,
array.array, bytearray, ...) or None for an empty message. The views share
memory with `buf`, so receiving into them fills the caller's buffer.

With a derived datatype the message's bytes are gathered into one packed
array (typemap.py) instead; a receive writes it back over the datatype's
layout when the message has landed (`written`, for point-to-point) or
when the collective returns (`writing_back`). Alltoallw's message,
`[buf, (counts, displs), datatypes]`, has byte displacements and a
datatype per rank (`read_w`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from meshcomm.mpi import datatypes as dt
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import typemap


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
    array: np.ndarray  # 1-D view of the message's elements (a packed copy for a derived datatype)
    datatype: dt.Datatype
    write_back: Callable[[], None] | None = None  # copies a packed receive buffer back into the caller's

    def store(self) -> None:
        if self.write_back is not None:
            self.write_back()


class _Packed(np.ndarray):
    """A packed receive buffer that remembers how to write itself back, through views of it too."""

    write_back = None

    def __array_finalize__(self, obj) -> None:
        self.write_back = getattr(obj, "write_back", None)


def written(target: np.ndarray) -> None:
    """After a message landed in `target`: if it is a packed buffer, copy it back to where the datatype says."""
    write_back = getattr(target, "write_back", None)
    if write_back is not None:
        write_back()


_scopes = threading.local()


def writing_back(method):
    """Wrap a call so the derived-datatype receive buffers it reads are written back when it returns."""

    def call(*args, **kwargs):
        stack = _scopes.__dict__.setdefault("stack", [])
        stack.append([])
        try:
            result = method(*args, **kwargs)
        finally:
            pending = stack.pop()
        for write_back in pending:
            write_back()
        return result

    call.__name__, call.__qualname__, call.__doc__ = method.__name__, method.__qualname__, method.__doc__
    return call


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
        if getattr(buf, "_released", False):
            return np.empty(0, dtype=np.uint8), None  # a released MPI.buffer holds no memory
        buf = np.asarray(buf)  # a subclass's own indexing rules (MPI.buffer's) do not bind the bytes
        if not (buf.flags.c_contiguous or buf.flags.f_contiguous):
            raise BufferError(f"{name} must be a contiguous array (C or Fortran order)")
        if writable and not buf.flags.writeable:
            raise BufferError(f"{name} is read-only, but this call writes into it")
        return buf.reshape(-1, order="A").view(np.uint8), buf.dtype
    try:
        view = memoryview(buf)
    except TypeError:
        array = _array_from_interface(buf)
        if array is None:
            raise TypeError(f"{name} must expose the buffer protocol, DLPack or an array interface "
                            f"(numpy array, bytearray, ...), got {type(buf).__name__}") from None
        return _raw(array, name, writable)
    if not view.c_contiguous:
        raise BufferError(f"{name} must be contiguous")
    if writable and view.readonly:
        raise BufferError(f"{name} is read-only, but this call writes into it")
    try:
        declared = np.dtype(view.format)
    except TypeError:
        declared = None
    raw = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, dtype=np.uint8)
    return raw, declared


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
    if interface is not None:
        from meshcomm.mpi import cuda_interface

        return cuda_interface.as_array(interface)
    return None


def _elements(raw: np.ndarray, datatype: dt.Datatype, name: str) -> np.ndarray:
    size = datatype.dtype.itemsize  # in memory: a MINLOC pair's padding included
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
        if len(items) > 2 and items[-1] is None:  # [buf, count, displ, None]: the buffer's own type
            items.pop()
        elif len(items) > 1 and isinstance(items[-1], (dt.Datatype, str)):
            datatype = items.pop()
        return items[0], items[1:], datatype
    return spec, [], None


def _datatype_of(datatype, declared: np.dtype | None) -> dt.Datatype:
    if isinstance(datatype, dt.Datatype) and not datatype:
        raise ValueError("DATATYPE_NULL cannot describe a message")
    if datatype is not None:
        return dt.resolve(datatype)
    if declared is None:
        return dt.PREDEFINED["BYTE"]
    if not declared.isnative:
        raise BufferError(f"the buffer's elements ({declared}) are not in native byte order; "
                          "name a datatype to send their bytes as they are")
    return dt.from_dtype(declared)


def read_spec(spec, name: str, writable: bool = False) -> Spec:
    """The elements a message specification names, as a 1-D numpy view of the caller's buffer."""
    buf, sizes, datatype = _split(spec, name)
    if isinstance(datatype, dt.Datatype) and not datatype.is_predefined:
        return _read_derived(buf, sizes, datatype, name, writable)
    raw, declared = _raw(buf, name, writable)
    datatype = _datatype_of(datatype, declared)
    whole = _elements(raw, datatype, name)
    count, displ = _count_and_displ(sizes)
    if count is None and not displ:
        return Spec(whole, datatype)
    if count is None:  # (None, displ): everything from the displacement on
        count = max(whole.size - displ, 0)
    if count < 0 or displ < 0 or displ + count > whole.size:
        raise ValueError(f"{name}: count {count} at displacement {displ} does not fit "
                         f"a buffer of {whole.size} {datatype.name}")
    return Spec(whole[displ : displ + count], datatype)


def _count_and_displ(sizes: list) -> tuple[int | None, int]:
    """(count or None, displacement) from the sizes part of a message specification."""
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        count, displ = sizes[0]
    elif len(sizes) == 1:
        count, displ = sizes[0], 0
    elif len(sizes) == 2:
        count, displ = sizes
    else:
        count, displ = None, 0
    return (None if count is None else int(count)), int(displ or 0)


def _read_derived(buf, sizes: list, datatype: dt.Datatype, name: str, writable: bool) -> Spec:
    """A derived datatype's message: its bytes packed into one array (of the entries' dtype when they share one).

    A receive buffer starts as a copy of what is there, so bytes a shorter
    message leaves alone keep their values when it is written back.
    """
    count, displ = _count_and_displ(sizes)
    extent = datatype.extent
    if extent < 0:
        raise ValueError(f"{name}: the datatype's extent {extent} is negative")
    if buf is BOTTOM:
        # Absolute addresses (from Get_address) in the datatype: the memory is wherever they point.
        rows = typemap.element_runs(datatype, 1 if count is None else count, displ * extent)
        low, high = typemap.span(rows)
        mem = typemap.memory_at(low, high)
        rows = rows - np.array([low, 0], dtype=np.int64)
    else:
        mem, _ = _raw(buf, name, writable)
        if count is None and mem.size == 0:
            count = 0
        elif count is None:
            if extent <= 0 or mem.size % extent:
                raise ValueError(f"{name}: cannot infer a count: the buffer's {mem.size} bytes are not a multiple "
                                 f"of the datatype's extent {extent}")
            count = mem.size // extent - displ
        if count < 0:
            raise ValueError(f"{name}: count must be >= 0, got {count}")
        rows = typemap.element_runs(datatype, count, displ * extent)
        low, high = typemap.span(rows)
        if low < 0 or high > mem.size:
            raise ValueError(f"{name}: {count} elements of the datatype at displacement {displ} reach bytes "
                             f"[{low}, {high}), outside the buffer's {mem.size} bytes")
    packed = typemap.gather(mem, rows)
    spec = Spec(packed, datatype)
    if writable:
        spec.write_back = lambda: typemap.scatter(mem, rows, packed)
        stack = getattr(_scopes, "stack", None)
        if stack:  # inside a collective: written back when it returns
            stack[-1].append(spec.write_back)
        else:  # a receive: written back by whoever fills it (comm._copy_into)
            spec.array = packed.view(_Packed)
            spec.array.write_back = spec.write_back
    leaf = datatype.dtype
    if leaf is not None and packed.size % leaf.itemsize == 0:
        spec.array = spec.array.view(leaf)
    return spec


def read_vector(spec, name: str, nranks: int, writable: bool = False) -> VectorSpec:
    """A v-collective's buffer: counts and displacements per rank (default: equal consecutive pieces)."""
    buf, sizes, datatype = _split(spec, name)
    derived = isinstance(datatype, dt.Datatype) and not datatype.is_predefined
    if derived:  # counts and displacements in elements of the datatype, a piece each extent
        if datatype.extent < 0:
            raise ValueError(f"{name}: the datatype's extent {datatype.extent} is negative")
        mem, _ = _raw(buf, name, writable)
        total = mem.size // datatype.extent if datatype.extent else 0
    else:
        raw, declared = _raw(buf, name, writable)
        datatype = _datatype_of(datatype, declared)
        whole = _elements(raw, datatype, name)
        total = whole.size
    counts = displs = None
    if len(sizes) == 1 and isinstance(sizes[0], tuple) and len(sizes[0]) == 2:
        counts, displs = sizes[0]
    elif len(sizes) == 1 and isinstance(sizes[0], np.ndarray) and sizes[0].ndim == 0:
        counts = sizes[0].item() if sizes[0].dtype.kind in "iu" else sizes[0]
    elif len(sizes) == 1:
        counts = sizes[0]
    elif len(sizes) == 2:
        counts, displs = sizes
    if counts is None:
        if total % nranks:
            raise ValueError(f"{name}: {total} elements do not split evenly over {nranks} ranks")
        counts = [total // nranks] * nranks
    elif _is_int(counts):
        counts = [int(counts)] * nranks
    counts = _int_list(counts, f"{name} counts")
    if len(counts) != nranks:
        raise err.Exception(err.ERR_COUNT, f"{name}: {len(counts)} counts for {nranks} ranks")
    if displs is None:
        displs = [sum(counts[:r]) for r in range(nranks)]
    elif _is_int(displs):  # a stride: rank r's piece starts at r * displs
        displs = [int(displs) * r for r in range(nranks)]
    displs = _int_list(displs, f"{name} displs")
    if derived:
        return _packed_vector(mem, counts, displs, datatype, name, writable)
    for r in range(nranks):
        if counts[r] < 0 or displs[r] < 0 or displs[r] + counts[r] > whole.size:
            raise err.Exception(err.ERR_COUNT, f"{name}: count {counts[r]} at displacement {displs[r]} for rank {r} "
                                               f"does not fit a buffer of {whole.size} {datatype.name}")
    return VectorSpec(whole, counts, displs, datatype)


def _packed_vector(mem: np.ndarray, counts: list[int], displs: list[int], datatype: dt.Datatype, name: str,
                   writable: bool) -> VectorSpec:
    """A v-collective's buffer with a derived datatype: every rank's piece packed, one after the other.

    Counts become counts of the packed array's elements; a receive buffer is
    written back, piece by piece, when the collective returns (writing_back).
    """
    rows = []
    for r, (count, displ) in enumerate(zip(counts, displs)):
        if count < 0:
            raise err.Exception(err.ERR_COUNT, f"{name}: count {count} for rank {r} must be >= 0")
        rows.append(typemap.element_runs(datatype, count, displ * datatype.extent))
        low, high = typemap.span(rows[-1])
        if low < 0 or high > mem.size:
            raise err.Exception(err.ERR_COUNT, f"{name}: {count} elements at displacement {displ} for rank {r} "
                                               f"reach bytes [{low}, {high}), outside the buffer's {mem.size}")
    pieces = [typemap.gather(mem, r) for r in rows]
    packed = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint8)
    leaf = datatype.dtype
    unit = 1 if leaf is None else leaf.itemsize
    sizes = [p.size // unit for p in pieces]
    starts = [sum(sizes[:r]) for r in range(len(sizes))]
    spec = VectorSpec(packed if leaf is None else packed.view(leaf), sizes, starts, datatype)
    if writable:
        def write_back() -> None:
            for r, piece_rows in enumerate(rows):
                typemap.scatter(mem, piece_rows, packed[starts[r] * unit : (starts[r] + sizes[r]) * unit])

        stack = getattr(_scopes, "stack", None)
        if not stack:
            raise err.Exception(err.ERR_INTERN, f"{name}: a derived-datatype receive buffer read outside a collective")
        stack[-1].append(write_back)
    return spec


def _int_list(values, name: str) -> list[int]:
    """Integers from a sequence or a numpy array of them; TypeError for anything else (3.1, '3')."""
    items = np.asarray(values).reshape(-1) if isinstance(values, np.ndarray) else values
    if not all(_is_int(v) for v in items):
        raise TypeError(f"{name} must be integers, got {values!r}")
    return [int(v) for v in items]


def _is_int(value) -> bool:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass
class WSpec:
    """Alltoallw's buffer: per rank, a count of its own datatype at a byte displacement, as runs in `mem`."""

    mem: np.ndarray  # the bytes the pieces are read from and written to
    rows: list[np.ndarray]  # per rank, its piece's (offset, length) runs in mem

    def nbytes(self, rank: int) -> int:
        return int(self.rows[rank][:, 1].sum())

    def piece(self, rank: int) -> np.ndarray:
        return typemap.gather(self.mem, self.rows[rank])

    def put(self, rank: int, data: np.ndarray) -> None:
        typemap.scatter(self.mem, self.rows[rank], data)


def _per_rank(values, name: str, nranks: int) -> list:
    if isinstance(values, (list, tuple)):
        if len(values) != nranks:
            raise err.Exception(err.ERR_COUNT, f"{name}: {len(values)} entries for {nranks} ranks")
        return list(values)
    return [values] * nranks


def read_w(spec, name: str, nranks: int, writable: bool = False) -> WSpec:
    """[buf, (counts, displs), datatypes] or [buf, counts, displs, datatypes]: displacements in bytes."""

    if not isinstance(spec, (list, tuple)) or len(spec) not in (2, 3, 4):
        raise ValueError(f"{name} must be [buf, (counts, displs), datatypes] or [buf, counts, displs, datatypes]")
    counts = displs = None
    if len(spec) == 4:
        buf, counts, displs, datatypes = spec
    elif len(spec) == 2:
        buf, datatypes = spec
    elif isinstance(spec[1], tuple) and len(spec[1]) == 2 and not _is_int(spec[1][0]):
        buf, (counts, displs), datatypes = spec
    else:
        buf, counts, datatypes = spec
    if buf is BOTTOM and (counts is None or displs is None):
        raise ValueError(f"{name}: with BOTTOM, the counts and displacements must be given")
    datatypes = [dt.resolve(d) for d in _per_rank(datatypes, f"{name} datatypes", nranks)]
    counts = _int_list(_per_rank(1 if counts is None else counts, f"{name} counts", nranks), f"{name} counts")
    if displs is None:  # consecutive pieces
        ends = np.cumsum([c * d.extent for c, d in zip(counts, datatypes)])
        displs = [0, *ends[:-1].tolist()]
    displs = _int_list(_per_rank(displs, f"{name} displs", nranks), f"{name} displs")
    for r, count in enumerate(counts):
        if count < 0:
            raise err.Exception(err.ERR_COUNT, f"{name}: count {count} for rank {r} must be >= 0")
    rows = [typemap.element_runs(d, c, s) for d, c, s in zip(datatypes, counts, displs)]
    spans = [typemap.span(r) for r in rows if len(r)]
    low, high = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else (0, 0)
    if buf is BOTTOM:
        mem = typemap.memory_at(low, high)
        rows = [r - np.array([low, 0], dtype=np.int64) for r in rows]
    else:
        mem, _ = _raw(buf, name, writable)
        if low < 0 or high > mem.size:
            raise ValueError(f"{name}: the pieces reach bytes [{low}, {high}), outside the buffer's {mem.size} bytes")
    return WSpec(mem, rows)

"""Converting between numpy dtypes and MPI datatypes (mpi4py.util.dtlib's from_numpy_dtype / to_numpy_dtype).

numpy to MPI: a structured dtype becomes a struct resized to its itemsize,
a subarray dtype a contiguous (1-D) or C-order subarray type, a scalar the
predefined type of its type code. MPI to numpy reads the datatype's
decoding back: named types by their code, pairs as aligned structs,
vectors and indexed types as structs of blocks. Without numpy, to_numpy_dtype
answers with what numpy.dtype would have been given (a code, a tuple, a dict).
"""

from __future__ import annotations

from meshcomm.mpi import constants as C
from meshcomm.mpi.datatypes import PREDEFINED, Datatype, typealign, typecode

try:
    from numpy import dtype as _np_dtype
except ImportError:  # numpy is a dependency; tests set this to None to check the fallback
    _np_dtype = None

_PAIR_VALUES = ("SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "LONG_DOUBLE")


def _numpy(spec, **kwargs):
    if _np_dtype is None:
        return (spec, kwargs) if kwargs else spec
    return _np_dtype(spec, **kwargs)


def _aligned(datatype: Datatype, offset: int = 0) -> bool:
    """Whether every entry of `datatype`, placed at `offset`, sits at a multiple of its own alignment."""
    if datatype.is_predefined:
        return offset == 0 or offset % (typealign(datatype) or 1) == 0
    base, _, info = datatype.decode()
    combiner = datatype.combiner
    parts = [(base, 0)]
    if combiner == C.COMBINER_RESIZED:
        parts = [(base, info["extent"])]  # the next element starts an extent further on
    elif combiner == C.COMBINER_STRUCT:
        parts = list(zip(info["datatypes"], info["displacements"]))
    elif combiner == C.COMBINER_HVECTOR:
        parts = [(base, info["stride"] if info["count"] > 1 else 0)]
    elif combiner in (C.COMBINER_HINDEXED, C.COMBINER_HINDEXED_BLOCK):
        parts = [(base, d) for d in info["displacements"]]
    return all(_aligned(t, offset + d) for t, d in parts)


def from_numpy_dtype(dtype) -> Datatype:
    """A new MPI datatype laid out as the numpy dtype is (the caller frees it)."""
    if _np_dtype is None:
        raise RuntimeError("numpy is not available")
    dtype = _np_dtype(dtype)
    if dtype.hasobject:
        raise ValueError(f"numpy dtype {dtype} holds Python objects, which have no MPI datatype")
    if not dtype.isnative:
        raise ValueError(f"numpy dtype {dtype} is not in native byte order")
    if dtype.fields:
        fields = [dtype.fields[name] for name in dtype.names]
        parts = [from_numpy_dtype(field[0]) for field in fields]
        struct = Datatype.Create_struct([1] * len(parts), [field[1] for field in fields], parts)
        return struct.Create_resized(0, dtype.itemsize)
    if dtype.subdtype:
        base, shape = dtype.subdtype
        element = from_numpy_dtype(base)
        if len(shape) == 1:
            return element.Create_contiguous(shape[0])
        return element.Create_subarray(shape, shape, [0] * len(shape))
    return Datatype.fromcode(dtype.char).Dup()


def _field(datatype: Datatype, count: int):
    element = to_numpy_dtype(datatype)
    return element if count == 1 else (element, count)


def _struct(names_count: int, formats: list, offsets: list, aligned: bool, itemsize: int | None):
    spec = {"names": [f"f{i}" for i in range(names_count)], "formats": formats, "offsets": offsets}
    if itemsize is not None:
        spec["itemsize"] = itemsize
    spec["aligned"] = aligned
    return _numpy(spec)


def to_numpy_dtype(datatype: Datatype):
    """The numpy dtype laid out as the MPI datatype is; ValueError for layouts numpy cannot describe."""
    if not datatype:
        raise ValueError("DATATYPE_NULL has no numpy dtype")
    combiner = datatype.combiner
    if combiner == C.COMBINER_NAMED:
        code = typecode(datatype)
        if code is not None:
            return _numpy(code)
        for value in _PAIR_VALUES:  # MINLOC/MAXLOC pairs: a C struct of the value and an int
            if datatype == PREDEFINED[f"{value}_INT"]:
                return _numpy(f"{typecode(PREDEFINED[value])},i", align=True)
        raise ValueError(f"{datatype.Get_name()} has no numpy dtype")
    if combiner in (C.COMBINER_F90_INTEGER, C.COMBINER_F90_REAL, C.COMBINER_F90_COMPLEX):
        return _numpy(typecode(datatype))
    base, _, info = datatype.decode()
    if combiner == C.COMBINER_DUP:
        return to_numpy_dtype(base)
    if combiner == C.COMBINER_CONTIGUOUS:
        return _numpy((to_numpy_dtype(base), (info["count"],)))
    if combiner == C.COMBINER_SUBARRAY:
        sizes = info["sizes"]
        if info["subsizes"] != sizes or any(info["starts"]):
            raise ValueError("numpy describes only whole subarrays, not a part of one")
        shape = sizes[::-1] if info["order"] == C.ORDER_FORTRAN else sizes
        return _numpy((to_numpy_dtype(base), tuple(shape)))
    aligned = True
    if combiner == C.COMBINER_RESIZED and base.combiner == C.COMBINER_STRUCT:
        aligned = _aligned(base, info["extent"])
        combiner, info = C.COMBINER_STRUCT, base.decode()[2]
    if combiner == C.COMBINER_STRUCT:
        types, offsets = info["datatypes"], info["displacements"]
        formats = [_field(t, n) for t, n in zip(types, info["blocklengths"])]
        aligned = aligned and all(_aligned(t, d) for t, d in zip(types, offsets))
        return _struct(len(types), formats, list(offsets), aligned, datatype.extent)
    if combiner in (C.COMBINER_VECTOR, C.COMBINER_HVECTOR):
        count, stride = info["count"], info["stride"]
        if combiner == C.COMBINER_VECTOR:
            stride, aligned = stride * base.extent, _aligned(base)
        else:
            stride = stride if count > 1 else 0
            aligned = _aligned(base, stride)
        formats = [(to_numpy_dtype(base), (info["blocklength"],))] * count
        return _struct(count, formats, [stride * i for i in range(count)], aligned, datatype.extent)
    if combiner in (C.COMBINER_INDEXED, C.COMBINER_HINDEXED, C.COMBINER_INDEXED_BLOCK, C.COMBINER_HINDEXED_BLOCK):
        displacements = info["displacements"]
        lengths = info["blocklengths"] if "blocklengths" in info else [info["blocklength"]] * len(displacements)
        in_bytes = combiner in (C.COMBINER_HINDEXED, C.COMBINER_HINDEXED_BLOCK)
        scale = 1 if in_bytes else base.extent
        aligned = _aligned(base) and (not in_bytes or all(_aligned(base, d) for d in displacements))
        element = to_numpy_dtype(base)
        formats = [(element, (n,)) for n in lengths]
        return _struct(len(displacements), formats, [d * scale for d in displacements], aligned, None)
    raise ValueError(f"numpy has no dtype for a datatype made by the {combiner} combiner")

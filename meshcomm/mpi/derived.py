"""Derived datatypes: the Create_* constructors, their bounds, and decoding them back (envelope, contents, decode).

Every constructor places copies of older types: a block is `count` copies of
one type, each `extent` after the last, starting at a byte displacement.
From the blocks alone a type gets its size and bounds (lb, ub and the true
ones, without building its type map, so BYTE.Create_contiguous(2**31) is
cheap); its type map, as runs of contiguous bytes, is built when a buffer
is first moved through it (typemap.py). A struct's extent is padded up to
its widest entry's alignment, as a C compiler pads a struct, unless a
resized type among its parts fixed its bounds.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.datatypes import PREDEFINED, Datatype, _Type

# A block list: (type, byte displacements of each block's first copy, copies in each block); the two
# sequences are Python lists for the few blocks of most types, numpy arrays for subarrays and darrays.
Block = tuple[_Type, "list[int] | np.ndarray", "list[int] | np.ndarray"]

_NAMES = {
    C.COMBINER_NAMED: "NAMED", C.COMBINER_DUP: "DUP", C.COMBINER_CONTIGUOUS: "CONTIGUOUS",
    C.COMBINER_VECTOR: "VECTOR", C.COMBINER_HVECTOR: "HVECTOR", C.COMBINER_INDEXED: "INDEXED",
    C.COMBINER_HINDEXED: "HINDEXED", C.COMBINER_INDEXED_BLOCK: "INDEXED_BLOCK",
    C.COMBINER_HINDEXED_BLOCK: "HINDEXED_BLOCK", C.COMBINER_STRUCT: "STRUCT", C.COMBINER_SUBARRAY: "SUBARRAY",
    C.COMBINER_DARRAY: "DARRAY", C.COMBINER_RESIZED: "RESIZED", C.COMBINER_F90_REAL: "F90_REAL",
    C.COMBINER_F90_COMPLEX: "F90_COMPLEX", C.COMBINER_F90_INTEGER: "F90_INTEGER",
    C.COMBINER_VALUE_INDEX: "VALUE_INDEX",
}


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise err.Exception(err.ERR_COUNT, f"{name} must be >= 0, got {value}")
    return int(value)


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


def _ints(values, name: str, counts: bool = False) -> list[int]:
    check = _count if counts else _int
    return [check(v, f"{name}[{i}]") for i, v in enumerate(values)]


def _old(datatype: Datatype) -> _Type:
    if not isinstance(datatype, Datatype):
        raise TypeError(f"oldtype must be an MPI.Datatype, got {type(datatype).__name__}")
    return datatype._checked()


def _reach(starts: np.ndarray, counts: np.ndarray, extent: int) -> tuple[int, int, int] | None:
    """(lowest first-copy start, highest last-copy start, copies) of a block list; None if it has no copies."""
    if isinstance(starts, list):  # plain Python is faster than numpy on the few blocks most types have
        pairs = [(s, (c - 1) * extent) for s, c in zip(starts, counts) if c > 0]
        if not pairs:
            return None
        return (min(s + min(span, 0) for s, span in pairs), max(s + max(span, 0) for s, span in pairs), sum(counts))
    keep = counts > 0
    starts, counts = starts[keep], counts[keep]
    if not starts.size:
        return None
    span = (counts - 1) * extent
    return int((starts + np.minimum(span, 0)).min()), int((starts + np.maximum(span, 0)).max()), int(counts.sum())


def _build(combiner: int, base: Datatype | None, params: dict, blocks: list[Block]) -> Datatype:
    """A new type placing the blocks' copies; bounds and size from the blocks, as MPI defines them."""
    size, lbs, ubs, true_lbs, true_ubs = 0, [], [], [], []
    leaves, align, sticky = set(), 1, False
    for t, starts, counts in blocks:
        reach = _reach(starts, counts, t.ub - t.lb)
        if reach is None:
            continue
        low, high, copies = reach
        lbs.append(low + t.lb)
        ubs.append(high + t.ub)
        if t.size:
            true_lbs.append(low + t.true_lb)
            true_ubs.append(high + t.true_ub)
        size += copies * t.size
        leaves.add(t.leaf)
        align, sticky = max(align, t.align), sticky or t.sticky
    lb, ub = (min(lbs), max(ubs)) if lbs else (0, 0)
    true_lb, true_ub = (min(true_lbs), max(true_ubs)) if true_lbs else (0, 0)
    if combiner == C.COMBINER_STRUCT and not sticky and (ub - lb) % align:
        ub += align - (ub - lb) % align
    leaf = leaves.pop() if len(leaves) == 1 else None
    t = _Type(dtype=None if leaf is None else leaf.dtype, size=size, lb=lb, ub=ub, true_lb=true_lb, true_ub=true_ub,
              align=align, sticky=sticky, combiner=combiner, base=base, params=params, leaf=leaf)
    t.blocks = blocks
    return Datatype._of(t)


def _keep(datatype: Datatype) -> Datatype:
    """The handle a new type holds on to: the predefined object itself, else a handle of its own."""
    return datatype if datatype.is_named else Datatype(datatype)


# ----- constructors


def Dup(self) -> Datatype:
    t = self._checked()
    new = _build(C.COMBINER_DUP, _keep(self), {}, [(t, [0], [1])])
    new._t.code, new._t.sticky = t.code, t.sticky
    return new


_INT_MAX = 2**31 - 1


def Create_contiguous(self, count: int) -> Datatype:
    t, count = _old(self), _count(count, "count")
    if count > _INT_MAX:
        # MPI 3.1 counts are C ints: a larger count is a struct of INT_MAX-sized blocks and the rest.
        blocks, rest = divmod(count, _INT_MAX)
        whole, tail = self.Create_vector(blocks, _INT_MAX, _INT_MAX), self.Create_contiguous(rest)
        return Create_struct([1, 1], [0, blocks * _INT_MAX * (t.ub - t.lb)], [whole, tail])
    return _build(C.COMBINER_CONTIGUOUS, _keep(self), {"count": count}, [(t, [0], [count])])


def _vector(self, combiner, count, blocklength, stride, stride_bytes: bool) -> Datatype:
    t = _old(self)
    count, blocklength, stride = _count(count, "count"), _count(blocklength, "blocklength"), _int(stride, "stride")
    step = stride if stride_bytes else stride * (t.ub - t.lb)
    params = {"count": count, "blocklength": blocklength, "stride": stride}
    return _build(combiner, _keep(self), params, [(t, [i * step for i in range(count)], [blocklength] * count)])


def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
    return _vector(self, C.COMBINER_VECTOR, count, blocklength, stride, stride_bytes=False)


def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
    return _vector(self, C.COMBINER_HVECTOR, count, blocklength, stride, stride_bytes=True)


def _indexed(self, combiner, blocklengths, displacements, in_bytes: bool, name: str) -> Datatype:
    t = _old(self)
    displacements = _ints(displacements, "displacements")
    if isinstance(blocklengths, (int, np.integer)):
        blocklength = _count(blocklengths, "blocklength")
        lengths = [blocklength] * len(displacements)
        params = {"blocklength": blocklength, "displacements": displacements}
    else:
        lengths = _ints(blocklengths, "blocklengths", counts=True)
        if len(lengths) != len(displacements):
            raise ValueError(f"{name}: {len(lengths)} blocklengths but {len(displacements)} displacements")
        params = {"blocklengths": lengths, "displacements": displacements}
    scale = 1 if in_bytes else t.ub - t.lb
    return _build(combiner, _keep(self), params, [(t, [d * scale for d in displacements], lengths)])


def Create_indexed(self, blocklengths, displacements) -> Datatype:
    return _indexed(self, C.COMBINER_INDEXED, list(blocklengths), displacements, False, "Create_indexed")


def Create_hindexed(self, blocklengths, displacements) -> Datatype:
    return _indexed(self, C.COMBINER_HINDEXED, list(blocklengths), displacements, True, "Create_hindexed")


def Create_indexed_block(self, blocklength: int, displacements) -> Datatype:
    return _indexed(self, C.COMBINER_INDEXED_BLOCK, _count(blocklength, "blocklength"), displacements, False,
                    "Create_indexed_block")


def Create_hindexed_block(self, blocklength: int, displacements) -> Datatype:
    return _indexed(self, C.COMBINER_HINDEXED_BLOCK, _count(blocklength, "blocklength"), displacements, True,
                    "Create_hindexed_block")


def Create_struct(blocklengths, displacements, datatypes) -> Datatype:
    lengths = _ints(blocklengths, "blocklengths", counts=True)
    displacements = _ints(displacements, "displacements")
    datatypes = list(datatypes)
    if not len(lengths) == len(displacements) == len(datatypes):
        raise ValueError(f"Create_struct: {len(lengths)} blocklengths, {len(displacements)} displacements and "
                         f"{len(datatypes)} datatypes; they must be as many")
    kept = [_keep(d) for d in datatypes]
    blocks = [(_old(d), [disp], [n]) for n, disp, d in zip(lengths, displacements, datatypes)]
    params = {"blocklengths": lengths, "displacements": displacements, "datatypes": kept}
    return _build(C.COMBINER_STRUCT, None, params, blocks)


def _order(order) -> int:
    if order not in (C.ORDER_C, C.ORDER_FORTRAN):
        raise err.Exception(err.ERR_ARG, f"order must be ORDER_C or ORDER_FORTRAN, got {order!r}")
    return int(order)


def _grid_type(self, combiner, params: dict, sizes: list[int], picks: list[np.ndarray], order: int) -> Datatype:
    """Copies of oldtype at the picked indices of each dimension of a `sizes` array, in array order; extent: all of it."""
    t = _old(self)
    extent = t.ub - t.lb
    fortran = order == C.ORDER_FORTRAN
    dims = range(len(sizes) - 1, -1, -1) if fortran else range(len(sizes))
    linear = np.zeros(1, dtype=np.int64)
    for d in dims:  # slowest dimension first, so the flattened result runs in the array's element order
        linear = (linear[:, None] * sizes[d] + picks[d][None, :]).reshape(-1)
    new = _build(combiner, _keep(self), params, [(t, linear * extent, np.ones_like(linear))])
    whole = int(np.prod(sizes, dtype=np.int64)) * extent
    new._t.lb, new._t.ub, new._t.sticky = 0, whole, True
    return new


def Create_subarray(self, sizes, subsizes, starts, order: int = C.ORDER_C) -> Datatype:
    sizes, subsizes = _ints(sizes, "sizes", counts=True), _ints(subsizes, "subsizes", counts=True)
    starts, order = _ints(starts, "starts", counts=True), _order(order)
    if not len(sizes) == len(subsizes) == len(starts) or not sizes:
        raise ValueError("Create_subarray: sizes, subsizes and starts must be equally long, and not empty")
    for d, (n, sub, start) in enumerate(zip(sizes, subsizes, starts)):
        if n < 1 or sub < 1 or start + sub > n:
            raise err.Exception(err.ERR_ARG, f"Create_subarray: dimension {d} has size {n}, subsize {sub} and start "
                                             f"{start}; need 1 <= subsize and start + subsize <= size")
    picks = [np.arange(start, start + sub, dtype=np.int64) for start, sub in zip(starts, subsizes)]
    params = {"sizes": sizes, "subsizes": subsizes, "starts": starts, "order": order}
    return _grid_type(self, C.COMBINER_SUBARRAY, params, sizes, picks, order)


def _owned(gsize: int, distrib: int, darg: int, nprocs: int, coord: int, d: int) -> np.ndarray:
    """The global indices of one dimension that process coordinate `coord` holds."""
    index = np.arange(gsize, dtype=np.int64)
    if distrib == C.DISTRIBUTE_NONE:
        return index
    if distrib == C.DISTRIBUTE_BLOCK:
        block = -(-gsize // nprocs) if darg == C.DISTRIBUTE_DFLT_DARG else darg
        if block < 1 or block * nprocs < gsize:
            raise err.Exception(err.ERR_ARG, f"Create_darray: block size {block} over {nprocs} processes does not "
                                             f"cover dimension {d} of {gsize}")
        return index[coord * block : (coord + 1) * block]
    if distrib == C.DISTRIBUTE_CYCLIC:
        block = 1 if darg == C.DISTRIBUTE_DFLT_DARG else darg
        if block < 1:
            raise err.Exception(err.ERR_ARG, f"Create_darray: cyclic block {block} in dimension {d} must be >= 1")
        return index[(index // block) % nprocs == coord]
    raise err.Exception(err.ERR_ARG, f"Create_darray: distribs[{d}] must be DISTRIBUTE_BLOCK, _CYCLIC or _NONE")


def Create_darray(self, size: int, rank: int, gsizes, distribs, dargs, psizes, order: int = C.ORDER_C) -> Datatype:
    size, rank, order = _count(size, "size"), _count(rank, "rank"), _order(order)
    gsizes, distribs = _ints(gsizes, "gsizes", counts=True), _ints(distribs, "distribs")
    dargs, psizes = _ints(dargs, "dargs"), _ints(psizes, "psizes", counts=True)
    if not len(gsizes) == len(distribs) == len(dargs) == len(psizes) or not gsizes:
        raise ValueError("Create_darray: gsizes, distribs, dargs and psizes must be equally long, and not empty")
    if int(np.prod(psizes)) != size or not 0 <= rank < size:
        raise err.Exception(err.ERR_ARG, f"Create_darray: psizes {psizes} must multiply to size {size}, "
                                         f"and rank {rank} be below it")
    coords, rest = [], rank
    for p in reversed(psizes):  # the process grid is numbered row-major, whatever the array order
        coords.append(rest % p)
        rest //= p
    coords.reverse()
    picks = [_owned(g, dist, darg, p, c, d)
             for d, (g, dist, darg, p, c) in enumerate(zip(gsizes, distribs, dargs, psizes, coords))]
    params = {"size": size, "rank": rank, "gsizes": gsizes, "distribs": distribs, "dargs": dargs,
              "psizes": psizes, "order": order}
    return _grid_type(self, C.COMBINER_DARRAY, params, gsizes, picks, order)


def Create_resized(self, lb: int, extent: int) -> Datatype:
    t = _old(self)
    lb, extent = _int(lb, "lb"), _int(extent, "extent")
    new = _build(C.COMBINER_RESIZED, _keep(self), {"lb": lb, "extent": extent}, [(t, [0], [1])])
    new._t.lb, new._t.ub, new._t.sticky = lb, lb + extent, True
    return new


# ----- Fortran 90 and MINLOC/MAXLOC types


def _f90(combiner: int, key: str, params: dict) -> Datatype:
    """A parameterized Fortran type: the predefined type of that size, under the F90 combiner."""
    source = PREDEFINED[key]._t
    t = _Type(name=source.name, dtype=source.dtype, code=source.code, size=source.size, ub=source.ub,
              true_ub=source.true_ub, align=source.align, combiner=combiner, params=params)
    t.leaf = source.leaf
    return Datatype._of(t)


def Create_f90_integer(r: int) -> Datatype:
    r = _int(r, "r")
    for digits, key in ((2, "INTEGER1"), (4, "INTEGER2"), (9, "INTEGER4"), (18, "INTEGER8")):
        if r <= digits:
            return _f90(C.COMBINER_F90_INTEGER, key, {"r": r})
    raise err.Exception(err.ERR_ARG, f"Create_f90_integer: no integer type holds {r} decimal digits")


def _real_key(p: int, r: int, name: str, kinds: tuple) -> str:
    undefined = C.UNDEFINED
    for precision, exponent, key in kinds:
        if (p == undefined or p <= precision) and (r == undefined or r <= exponent):
            return key
    raise err.Exception(err.ERR_ARG, f"{name}: no type has precision {p} and exponent range {r}")


def Create_f90_real(p: int, r: int) -> Datatype:
    p, r = _int(p, "p"), _int(r, "r")
    key = _real_key(p, r, "Create_f90_real", ((6, 37, "REAL4"), (15, 307, "REAL8")))
    return _f90(C.COMBINER_F90_REAL, key, {"p": p, "r": r})


def Create_f90_complex(p: int, r: int) -> Datatype:
    p, r = _int(p, "p"), _int(r, "r")
    key = _real_key(p, r, "Create_f90_complex", ((6, 37, "COMPLEX8"), (15, 307, "COMPLEX16")))
    return _f90(C.COMBINER_F90_COMPLEX, key, {"p": p, "r": r})


_VALUE_INDEX = {"SHORT": "SHORT_INT", "INT": "INT_INT", "LONG": "LONG_INT", "FLOAT": "FLOAT_INT",
                "DOUBLE": "DOUBLE_INT", "LONG_DOUBLE": "LONG_DOUBLE_INT"}


def Get_value_index(value: Datatype, index: Datatype) -> Datatype:
    """The predefined (value, index) pair type MINLOC/MAXLOC use; DATATYPE_NULL where there is none."""
    _old(value), _old(index)
    if index != PREDEFINED["INT"]:
        return Datatype()
    for key, pair in _VALUE_INDEX.items():
        if value == PREDEFINED[key]:
            return PREDEFINED[pair]
    return Datatype()


_CLASSES = {C.TYPECLASS_INTEGER: "INTEGER", C.TYPECLASS_REAL: "REAL", C.TYPECLASS_COMPLEX: "COMPLEX"}


def Match_size(typeclass: int, size: int) -> Datatype:
    """The predefined Fortran type of a type class and a size in bytes."""
    prefix = _CLASSES.get(typeclass)
    if prefix is None:
        raise err.Exception(err.ERR_ARG, f"typeclass must be TYPECLASS_INTEGER, _REAL or _COMPLEX, got {typeclass!r}")
    found = PREDEFINED.get(f"{prefix}{_int(size, 'size')}")
    if not found:
        raise err.Exception(err.ERR_ARG, f"no {prefix.lower()} type has {size} bytes")
    return found


# ----- decoding


def _contents(t: _Type) -> tuple[list[int], list[int], list[Datatype]]:
    """MPI_Type_get_contents' integers, addresses and datatypes for each combiner."""
    p, c = t.params, t.combiner
    old = [] if t.base is None else [t.base]
    if c == C.COMBINER_CONTIGUOUS:
        return [p["count"]], [], old
    if c == C.COMBINER_VECTOR:
        return [p["count"], p["blocklength"], p["stride"]], [], old
    if c == C.COMBINER_HVECTOR:
        return [p["count"], p["blocklength"]], [p["stride"]], old
    if c == C.COMBINER_INDEXED:
        return [len(p["blocklengths"]), *p["blocklengths"], *p["displacements"]], [], old
    if c == C.COMBINER_HINDEXED:
        return [len(p["blocklengths"]), *p["blocklengths"]], list(p["displacements"]), old
    if c == C.COMBINER_INDEXED_BLOCK:
        return [len(p["displacements"]), p["blocklength"], *p["displacements"]], [], old
    if c == C.COMBINER_HINDEXED_BLOCK:
        return [len(p["displacements"]), p["blocklength"]], list(p["displacements"]), old
    if c == C.COMBINER_STRUCT:
        return [len(p["blocklengths"]), *p["blocklengths"]], list(p["displacements"]), list(p["datatypes"])
    if c == C.COMBINER_SUBARRAY:
        return [len(p["sizes"]), *p["sizes"], *p["subsizes"], *p["starts"], p["order"]], [], old
    if c == C.COMBINER_DARRAY:
        return ([p["size"], p["rank"], len(p["gsizes"]), *p["gsizes"], *p["distribs"], *p["dargs"], *p["psizes"],
                 p["order"]], [], old)
    if c == C.COMBINER_RESIZED:
        return [], [p["lb"], p["extent"]], old
    if c == C.COMBINER_F90_INTEGER:
        return [p["r"]], [], []
    if c in (C.COMBINER_F90_REAL, C.COMBINER_F90_COMPLEX):
        return [p["p"], p["r"]], [], []
    return [], [], old  # DUP


def _handle(datatype: Datatype) -> Datatype:
    """What decoding hands out: predefined objects as they are, derived ones as new handles the caller may free."""
    return datatype if datatype.is_named else Datatype(datatype)


def Get_envelope(self) -> tuple[int, int, int, int, int]:
    t = self._checked()
    if t.combiner == C.COMBINER_NAMED:
        return 0, 0, 0, 0, C.COMBINER_NAMED
    integers, addresses, datatypes = _contents(t)
    return len(integers), len(addresses), 0, len(datatypes), t.combiner


def Get_contents(self) -> tuple[list[int], list[int], list[int], list[Datatype]]:
    t = self._checked()
    if t.combiner == C.COMBINER_NAMED:
        raise err.Exception(err.ERR_TYPE, f"{t.name} is a named datatype: it has no contents")
    integers, addresses, datatypes = _contents(t)
    return integers, addresses, [], [_handle(d) for d in datatypes]


def decode(self) -> tuple[Datatype, str, dict]:
    """(the type it was made from, the constructor's name, its arguments): enough to make it again."""
    t = self._checked()
    if t.combiner == C.COMBINER_NAMED:
        return self, "NAMED", {}
    params = {key: (list(map(_handle, value)) if key == "datatypes" else
                    list(value) if isinstance(value, list) else value) for key, value in t.params.items()}
    base = Datatype() if t.base is None else _handle(t.base)
    return base, _NAMES[t.combiner], params


def _rebuild(base: Datatype, constructor: str, params: dict) -> Datatype:
    if constructor == "DUP":
        return base.Dup()
    if constructor.startswith("F90_"):
        return globals()[f"Create_{constructor.lower()}"](**params)
    if constructor == "STRUCT":
        return Create_struct(**params)
    return globals()[f"Create_{constructor.lower()}"](base, **params)


def rebuild_args(datatype: Datatype):
    """What pickles a derived type: its constructor and arguments, so it unpickles as a new, equal-shaped type."""
    return (_rebuild, decode(datatype))


_METHODS = {
    "Dup": Dup, "Create_contiguous": Create_contiguous, "Create_vector": Create_vector,
    "Create_hvector": Create_hvector, "Create_indexed": Create_indexed, "Create_hindexed": Create_hindexed,
    "Create_indexed_block": Create_indexed_block, "Create_hindexed_block": Create_hindexed_block,
    "Create_subarray": Create_subarray, "Create_darray": Create_darray, "Create_resized": Create_resized,
    "Get_envelope": Get_envelope, "Get_contents": Get_contents, "decode": decode,
}
_STATIC = {
    "Create_struct": Create_struct, "Create_f90_integer": Create_f90_integer, "Create_f90_real": Create_f90_real,
    "Create_f90_complex": Create_f90_complex, "Get_value_index": Get_value_index, "Match_size": Match_size,
}
for _name, _method in _METHODS.items():
    setattr(Datatype, _name, _method)
for _name, _method in _STATIC.items():
    setattr(Datatype, _name, staticmethod(_method))
Datatype.Create_dup = Dup
Datatype.envelope = property(Get_envelope)
Datatype.contents = property(Get_contents)
Datatype.combiner = property(lambda self: self.Get_envelope()[-1])

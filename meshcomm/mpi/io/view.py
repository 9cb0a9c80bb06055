"""A file view: which bytes of a file a rank's accesses reach, and the data representations.

A view is a displacement, an etype and a filetype. From the displacement
on, the file is tiled with copies of the filetype, each an extent after
the last; the rank sees only the bytes the filetype's type map covers, as
one stream, counted in etypes. `file_runs` turns a stretch of that stream
into the (file offset, length) runs to read or write.

Data representations: "native" stores the bytes as they are in memory.
Register_datarep adds a name; one registered without conversion functions
stores bytes natively too. Conversions (and "internal", "external32" for
files) are not supported: Set_view refuses them with ERR_UNSUPPORTED_DATAREP.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import exceptions as err
from meshcomm.mpi import typemap
from meshcomm.mpi.datatypes import Datatype

_registered: dict[str, tuple] = {}  # datarep name -> (read_fn, write_fn, extent_fn, extra_state)


def Register_datarep(datarep: str, read_fn=None, write_fn=None, extent_fn=None, extra_state=None) -> None:
    """Name a data representation; without read_fn and write_fn it stores bytes natively."""
    if not isinstance(datarep, str):
        raise TypeError(f"datarep must be a str, got {type(datarep).__name__}")
    if datarep in ("native", "internal", "external32") or datarep in _registered:
        raise err.Exception(err.ERR_DUP_DATAREP, f"the data representation {datarep!r} already exists")
    for name, fn in (("read_fn", read_fn), ("write_fn", write_fn), ("extent_fn", extent_fn)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
    _registered[datarep] = (read_fn, write_fn, extent_fn, extra_state)


def _checked_datarep(datarep: str) -> str:
    if not isinstance(datarep, str):
        raise TypeError(f"datarep must be a str, got {type(datarep).__name__}")
    if datarep == "native":
        return datarep
    registered = _registered.get(datarep)
    if registered is not None and registered[0] is None and registered[1] is None:
        return datarep
    raise err.Exception(err.ERR_UNSUPPORTED_DATAREP,
                        f"data representation {datarep!r}: files store bytes natively only "
                        "('native', or a registered name without conversion functions)")


class View:
    """disp, etype, filetype and datarep, with the filetype's runs ready for mapping."""

    def __init__(self, disp: int, etype: Datatype, filetype: Datatype, datarep: str = "native") -> None:
        if isinstance(disp, bool) or not isinstance(disp, (int, np.integer)) or disp < 0:
            raise err.Exception(err.ERR_ARG, f"disp must be an int >= 0, got {disp!r}")
        for name, datatype in (("etype", etype), ("filetype", filetype)):
            if not isinstance(datatype, Datatype):
                raise TypeError(f"{name} must be an MPI.Datatype, got {type(datatype).__name__}")
            datatype._checked()  # DATATYPE_NULL raises
        self.disp, self.etype, self.filetype = int(disp), etype, filetype
        self.datarep = _checked_datarep(datarep)
        self.esize = etype.Get_size()
        t = filetype._t
        self.runs = typemap.runs(t)
        self.size, self.extent = int(self.runs[:, 1].sum()) if len(self.runs) else 0, t.ub - t.lb
        if self.esize <= 0 or self.size % self.esize:
            raise err.Exception(err.ERR_TYPE, f"the filetype ({self.size} bytes) must be made of whole etypes "
                                              f"({self.esize} bytes each)")
        if len(self.runs) and (np.any(self.runs[:, 0] < 0) or np.any(np.diff(self.runs[:, 0]) < 0)):
            raise err.Exception(err.ERR_TYPE, "a filetype's displacements must be >= 0 and never decrease")
        self.starts = np.cumsum(self.runs[:, 1]) - self.runs[:, 1]  # stream position of each run in a copy
        self.dense = len(self.runs) == 1 and self.runs[0, 0] == 0 and self.size == self.extent

    def file_runs(self, start: int, nbytes: int) -> np.ndarray:
        """(file offset, length) rows for stream bytes [start, start + nbytes), in stream order."""
        if nbytes <= 0:
            return np.empty((0, 2), dtype=np.int64)
        if self.dense:
            return np.array([[self.disp + start, nbytes]], dtype=np.int64)
        if self.size == 0:
            raise err.Exception(err.ERR_TYPE, "the view's filetype holds no data to reach")
        copies = np.arange(start // self.size, (start + nbytes - 1) // self.size + 1, dtype=np.int64)[:, None]
        offsets = (self.disp + copies * self.extent + self.runs[None, :, 0]).reshape(-1)
        positions = (copies * self.size + self.starts[None, :]).reshape(-1)
        lengths = np.tile(self.runs[:, 1], len(copies))
        low = np.maximum(positions, start)
        high = np.minimum(positions + lengths, start + nbytes)
        keep = high > low
        rows = np.column_stack([offsets[keep] + (low - positions)[keep], (high - low)[keep]])
        return typemap.merged(rows)

    def byte_offset(self, position: int) -> int:
        """The file offset of the etype at `position` (in etypes) of the stream."""
        return int(self.file_runs(position * self.esize, self.esize)[0, 0])

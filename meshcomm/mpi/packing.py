"""Pack and Unpack (native and external32), and addresses (Get_address, Aint_add, Aint_diff).

Packing writes a message's bytes, in type-map order, into a byte buffer at
a position and returns the next position; unpacking reads them back. The
native form is the packed bytes as they are; external32 stores every entry
big-endian, entry by entry, so only types whose entries share one numpy
type (all predefined types, and derived types made of one) pack that way.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi.buffer import buffer
from meshcomm.mpi.datatypes import Datatype

EXTERNAL32 = "external32"


def _position(position, what: str) -> int:
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or position < 0:
        raise err.Exception(err.ERR_ARG, f"{what} must be an int >= 0, got {position!r}")
    return int(position)


def _bytes_at(buf, name: str, position: int, nbytes: int, writable: bool) -> np.ndarray:
    raw, _ = msg._raw(buf, name, writable)
    if position + nbytes > raw.size:
        raise err.Exception(err.ERR_TRUNCATE, f"{name} holds {raw.size} bytes; {nbytes} bytes at position "
                                              f"{position} do not fit")
    return raw[position : position + nbytes]


def _external(datarep: str, datatype: Datatype) -> np.dtype:
    """The big-endian dtype the entries of `datatype` are stored as in external32."""
    if datarep != EXTERNAL32:
        raise err.Exception(err.ERR_ARG, f"datarep must be {EXTERNAL32!r}, got {datarep!r}")
    entry = datatype.dtype
    if entry is None:
        raise err.Exception(err.ERR_NOT_SUPPORTED, "external32 packs datatypes whose entries share one numpy "
                                                   "type; this one mixes several")
    return entry.newbyteorder(">")


def Pack(self, inbuf, outbuf, position: int, comm) -> int:
    """Append inbuf's elements of this datatype to outbuf at `position`; the position after them."""
    position = _position(position, "position")
    data = msg.read_spec([inbuf, self], "inbuf").array.view(np.uint8)
    _bytes_at(outbuf, "outbuf", position, data.size, writable=True)[...] = data
    return position + data.size


def Unpack(self, inbuf, position: int, outbuf, comm) -> int:
    """Fill outbuf's elements of this datatype from inbuf's bytes at `position`; the position after them."""
    position = _position(position, "position")
    target = msg.read_spec([outbuf, self], "outbuf", writable=True).array.view(np.uint8)
    target[...] = _bytes_at(inbuf, "inbuf", position, target.size, writable=False)
    msg.written(target)
    return position + target.size


def Pack_size(self, count: int, comm) -> int:
    return int(count) * self.Get_size()


def Pack_external(self, datarep: str, inbuf, outbuf, position: int) -> int:
    stored = _external(datarep, self)
    position = _position(position, "position")
    data = msg.read_spec([inbuf, self], "inbuf").array
    data = data.view(self.dtype).astype(stored).view(np.uint8)
    _bytes_at(outbuf, "outbuf", position, data.size, writable=True)[...] = data
    return position + data.size


def Unpack_external(self, datarep: str, inbuf, position: int, outbuf) -> int:
    stored = _external(datarep, self)
    position = _position(position, "position")
    target = msg.read_spec([outbuf, self], "outbuf", writable=True).array
    nbytes = target.size * target.itemsize
    source = _bytes_at(inbuf, "inbuf", position, nbytes, writable=False).view(stored)
    target.view(self.dtype)[...] = source
    msg.written(target)
    return position + nbytes


def Pack_external_size(self, datarep: str, count: int) -> int:
    _external(datarep, self)
    return int(count) * self.Get_size()


def Get_address(location) -> int:
    """The address of a buffer's first byte (0 for BOTTOM or None), for datatypes used with BOTTOM."""
    if location is None or location is msg.BOTTOM:
        return 0
    if isinstance(location, buffer):
        return location.address  # 0 for a buffer over no memory, as MPI says
    raw, _ = msg._raw(location, "location", writable=False)
    return int(raw.__array_interface__["data"][0])


def Aint_add(base: int, disp: int) -> int:
    return int(base) + int(disp)


def Aint_diff(addr1: int, addr2: int) -> int:
    return int(addr1) - int(addr2)


for _name, _method in {
    "Pack": Pack, "Unpack": Unpack, "Pack_size": Pack_size, "Pack_external": Pack_external,
    "Unpack_external": Unpack_external, "Pack_external_size": Pack_external_size,
}.items():
    setattr(Datatype, _name, _method)

"""A window's memory on its own rank: where a target displacement lands, checked against the exposed bytes.

A window made by Create, Allocate or Allocate_shared exposes one region,
addressed in units of its displacement unit; a dynamic window exposes the
regions attached to it, addressed by their absolute addresses (what
MPI.Get_address says), with a displacement unit of one.
"""

from __future__ import annotations

import threading

import numpy as np

from meshcomm.mpi import exceptions as err


def address_of(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0]) if array.size else 0


class Memory:
    """The bytes a window exposes on this rank."""

    def __init__(self, region: np.ndarray | None, disp_unit: int) -> None:
        self.dynamic = region is None
        self.disp_unit = 1 if self.dynamic else disp_unit
        self.region = np.empty(0, dtype=np.uint8) if region is None else region
        self._attached: dict[int, np.ndarray] = {}  # address -> bytes, for a dynamic window
        self._lock = threading.Lock()  # attach and detach race the target thread's lookups

    def locate(self, disp: int, nbytes: int) -> np.ndarray:
        """The `nbytes` bytes at displacement `disp`; ERR_RMA_RANGE when they are not all exposed."""
        if not self.dynamic:
            start = disp * self.disp_unit
            if disp < 0 or start + nbytes > self.region.size:
                raise err.Exception(err.ERR_RMA_RANGE, f"{nbytes} bytes at displacement {disp} (unit "
                                                       f"{self.disp_unit}) lie outside the window's "
                                                       f"{self.region.size} bytes")
            return self.region[start : start + nbytes]
        with self._lock:
            for address, region in self._attached.items():
                if address <= disp and disp + nbytes <= address + region.size:
                    return region[disp - address : disp - address + nbytes]
        raise err.Exception(err.ERR_RMA_RANGE, f"{nbytes} bytes at address {disp:#x} are not within memory "
                                               f"attached to the dynamic window")

    def attach(self, region: np.ndarray) -> None:
        address = address_of(region)
        with self._lock:
            for other, known in self._attached.items():
                if address < other + known.size and other < address + region.size:
                    raise err.Exception(err.ERR_RMA_ATTACH, f"memory at {address:#x} ({region.size} bytes) "
                                                            f"overlaps memory already attached at {other:#x}")
            self._attached[address] = region

    def detach(self, region: np.ndarray) -> None:
        address = address_of(region)
        with self._lock:
            if self._attached.pop(address, None) is None:
                raise err.Exception(err.ERR_RMA_ATTACH, f"no memory is attached at {address:#x}")

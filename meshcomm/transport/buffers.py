"""The byte view of a numpy array that the transport sends from or receives into."""

from __future__ import annotations

import numpy as np


def byte_view(array: np.ndarray) -> memoryview:
    """A flat 'B' memoryview over a contiguous array's bytes (no copy)."""
    return memoryview(array.view(np.uint8)) if array.size else memoryview(bytearray(0))

"""The byte view of a numpy array that the transport sends from or receives into."""

from __future__ import annotations

import numpy as np


def byte_view(array: np.ndarray) -> memoryview:
    """A flat 'B' memoryview over a contiguous array's bytes (no copy)."""
    try:
        # Through the buffer protocol: on every call's path, and a fraction of a view's cost (0.16 against 0.40 µs).
        return memoryview(array).cast("B")
    except (TypeError, ValueError):  # a dtype the buffer protocol cannot describe (ml_dtypes' bfloat16)
        return memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(bytearray(0))

"""The byte view of a numpy array that the transport sends from or receives into."""

from __future__ import annotations

import numpy as np


def byte_view(array: np.ndarray) -> memoryview:
    """A flat 'B' memoryview over a contiguous array's bytes (no copy)."""
    try:
        # Through the buffer protocol: on every call's path, and cheaper than a numpy view
        # (benchmarks/results/design-figures-2026-11-25.md).
        return memoryview(array).cast("B")
    except (TypeError, ValueError):  # not contiguous, or a dtype the buffer protocol cannot describe (ml_dtypes')
        if not array.flags.c_contiguous:
            raise ValueError(f"byte_view needs a C-contiguous array, got strides {array.strides}") from None
        return memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(bytearray(0))

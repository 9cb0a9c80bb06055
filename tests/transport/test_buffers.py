"""byte_view: the flat bytes of a contiguous array, shared with it, whatever its dtype and shape."""

from __future__ import annotations

import numpy as np
import pytest

from meshcomm.transport.buffers import byte_view


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64",
                                   "complex64", "complex128", "datetime64[s]"])  # the last has no buffer format
@pytest.mark.parametrize("shape", [(0,), (5,), (2, 3)])
def test_a_byte_view_is_the_array_s_bytes_flat_and_writes_through(dtype, shape) -> None:
    array = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
    view = byte_view(array)
    assert (view.format, view.ndim, view.nbytes) == ("B", 1, array.nbytes)
    assert bytes(view) == array.tobytes()
    if array.size:
        view[: array.itemsize] = bytes(array.itemsize)  # element 0 becomes all zero bits
        assert array.reshape(-1).view(np.uint8)[: array.itemsize].tolist() == [0] * array.itemsize


@pytest.mark.parametrize("dtype", ["float32", "datetime64[s]"])
def test_a_byte_view_of_an_array_that_is_not_contiguous_is_refused_not_copied(dtype) -> None:
    strided = np.zeros((4, 6), dtype)[:, ::2]
    with pytest.raises((TypeError, ValueError)):
        byte_view(strided)

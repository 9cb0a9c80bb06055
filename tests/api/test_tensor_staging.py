"""Torch tensors off the CPU are staged through host memory; float8 tensors travel as bytes.

These machines have no GPU, so the staging contract is checked on a stand-in:
a CPU tensor that reports device cuda:0 and counts its copies, as a CUDA
tensor's `.cpu()` and `copy_` would be used.
"""

from __future__ import annotations

import numpy as np
import pytest

from meshcomm.api.tensors import _torch_buffer, as_buffer, tensor_array

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")


class OnDevice:
    """Looks like a tensor on cuda:0 to meshcomm; its data lives in `data` (a CPU tensor)."""

    is_sparse = False
    layout = torch.strided
    device = torch.device("cuda", 0)
    is_cpu = False
    requires_grad = True  # detached, as a parameter would be

    def __init__(self, data) -> None:
        self.data = data
        self.dtype = data.dtype
        self.copies_to_host = 0
        self.copies_back = 0

    def detach(self):
        return self

    def cpu(self):
        self.copies_to_host += 1
        return self.data.clone()

    def copy_(self, source) -> None:
        self.copies_back += 1
        self.data.copy_(source)


def test_a_device_tensor_is_worked_on_in_host_memory_and_written_back_when_done() -> None:
    tensor = OnDevice(torch.arange(6, dtype=torch.float32))
    buffer = _torch_buffer(tensor, "tensor", writable=True)  # as_buffer's path for a torch.Tensor
    assert tensor.copies_to_host == 1 and buffer.flat.tolist() == [0, 1, 2, 3, 4, 5]
    buffer.flat[:] = 7  # what a collective does to its output
    assert tensor.data.tolist() == [0, 1, 2, 3, 4, 5]  # not before the operation completes
    buffer.finish()
    assert tensor.copies_back == 1 and tensor.data.tolist() == [7] * 6


def test_a_device_tensor_only_read_is_not_written_back() -> None:
    tensor = OnDevice(torch.ones(3, dtype=torch.bfloat16))
    buffer = _torch_buffer(tensor, "tensor", writable=False)
    assert buffer.logical == "bfloat16" and buffer.flat.dtype == np.uint16
    buffer.finish()
    assert tensor.copies_back == 0


def test_a_meta_tensor_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="output_tensor is on device meta, which holds no data"):
        as_buffer(torch.empty(2, device="meta"), "output_tensor", writable=True)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_tensors_travel_as_their_bytes(name: str) -> None:
    tensor = torch.tensor([0.5, -2.0, 448.0 if name == "float8_e4m3fn" else 57344.0]).to(getattr(torch, name))
    buffer = as_buffer(tensor, "tensor", writable=True)
    assert buffer.logical == name and buffer.flat.dtype == np.uint8
    assert buffer.flat.tobytes() == tensor.view(torch.uint8).numpy().tobytes()
    buffer.flat[0] = tensor.view(torch.uint8)[1]  # zero-copy: writing the bytes writes the tensor
    assert tensor[0].item() == -2.0


def test_a_lane_takes_a_cpu_tensor_s_own_memory_and_nothing_numpy_cannot_view() -> None:
    plain = torch.arange(4.0)
    view = tensor_array(plain)
    assert view is not None and view.ctypes.data == plain.data_ptr() and view.dtype == np.float32
    grad = torch.ones(2, requires_grad=True)
    view = tensor_array(grad)
    assert view is not None and view.ctypes.data == grad.data_ptr() and grad.requires_grad
    refused = {
        "conjugate bit": torch.ones(2, dtype=torch.complex64).conj(),
        "negative bit": torch.ones(2, dtype=torch.complex64).conj().imag,
        "bfloat16": torch.ones(2, dtype=torch.bfloat16),
        "uint16": torch.ones(2, dtype=torch.uint16),
        "sparse": torch.ones(2).to_sparse(),
        "meta device": torch.empty(2, device="meta"),
        "a subclass": torch.nn.Parameter(torch.ones(2)),
        "not a tensor": [1.0, 2.0],
    }
    assert {name: tensor_array(obj) for name, obj in refused.items()} == dict.fromkeys(refused)

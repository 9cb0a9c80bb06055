"""How the "meshcomm" backend gets registered with torch, and what registering it leaves alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

import torch.distributed as dist  # noqa: E402

from meshcomm.torch_backend import register  # noqa: E402
from meshcomm.torch_backend.process_group import reduce_op  # noqa: E402


def _python(code: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_torch_registers_the_backend_through_the_entry_point():
    code = ("import sys, torch.distributed as d; print('meshcomm' in d.Backend.backend_list, "
            "sorted(m for m in sys.modules if m.startswith('meshcomm')))")
    # Registered, and only the plugin's path loaded (not the algorithms, transports, ...): import torch stays cheap.
    plugin_only = str(["meshcomm", "meshcomm._version", "meshcomm.torch_backend", "meshcomm.torch_backend.plugin"])
    assert _python(code) == f"True {plugin_only}"
    assert _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0") == "False []"


def test_importing_meshcomm_after_torch_registers_it_without_the_entry_point():
    code = ("import torch.distributed as d; before = 'meshcomm' in d.Backend.backend_list; import meshcomm; "
            "print(before, 'meshcomm' in d.Backend.backend_list)")
    assert _python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0") == "False True"


def test_meshcomm_works_without_torch(tmp_path):
    code = ("import sys; sys.modules['torch'] = None; import numpy as np, meshcomm as m; "
            "m.init_process_group(init_method='file://' + sys.argv[1], rank=0, world_size=1); "
            "a = np.ones(3); m.all_reduce(a); print(a.tolist(), 'torch' in sys.modules and sys.modules['torch'] is not None)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0, 1.0, 1.0] False"


def test_registration_is_for_cpu_and_cuda_and_leaves_gloo_and_nccl_the_defaults():
    assert register() is True
    assert register() is True  # again: harmless
    assert "meshcomm" in dist.Backend.backend_list
    assert dist.Backend.backend_capability["meshcomm"] == ["cpu", "cuda"]  # CUDA tensors staged through the host
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"
    assert dist.Backend.default_device_backend_map["cuda"] == "nccl"


def test_reduce_ops_translate_with_premul_sum_factor():
    assert reduce_op(dist.ReduceOp.MAX).name == "max"
    assert reduce_op(dist.AllreduceOptions().reduceOp).name == "sum"
    premul = reduce_op(dist._make_nccl_premul_sum(0.25))
    assert (premul.name, premul.factor) == ("premul_sum", 0.25)


def test_a_reduce_op_that_is_not_one_names_the_argument():
    with pytest.raises(TypeError, match="reduceOp must be a torch.distributed.ReduceOp"):
        reduce_op("sum")


def test_public_names_are_exactly_these():
    import meshcomm.torch_backend as backend

    assert backend.__all__ == ["BACKEND_NAME", "register"]
    assert backend.BACKEND_NAME == "meshcomm"

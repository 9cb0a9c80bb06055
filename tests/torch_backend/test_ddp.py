"""DistributedDataParallel on backend "meshcomm" computes exactly what it computes on gloo.

Two ranks start from different weights (DDP must broadcast rank 0's) and
train a few steps on different data with several gradient buckets; every
step's gradients and the final parameters must be bit-identical to gloo's
(with 2 ranks a sum has one order, so no tolerance is needed).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from tests.torch_backend import harness, programs  # noqa: E402

SIZE = 2


@pytest.fixture(scope="module")
def runs() -> dict:
    return {backend: harness.run(programs.ddp_training, SIZE, backend) for backend in ("gloo", "meshcomm")}


@pytest.mark.parametrize("config", list(programs.DDP_CONFIGS))
def test_gradients_and_parameters_identical_to_gloo(runs, config):
    for rank in range(SIZE):
        gloo, ours = runs["gloo"][rank][config], runs["meshcomm"][rank][config]
        assert ours["grads"] == gloo["grads"], (rank, "gradients differ")
        assert ours["params"] == gloo["params"], (rank, "parameters differ")


@pytest.mark.parametrize("config", list(programs.DDP_CONFIGS))
def test_ranks_end_with_the_same_model(runs, config):
    assert runs["meshcomm"][0][config]["params"] == runs["meshcomm"][1][config]["params"]


@pytest.mark.parametrize("config", list(programs.DDP_CONFIGS))
def test_training_used_several_buckets(runs, config):
    assert runs["meshcomm"][0][config]["buckets"] >= 2


def test_unused_parameters_get_no_gradient(runs):
    steps = runs["meshcomm"][0]["find_unused_parameters"]["grads"]
    assert all(step[-1] is None and step[-2] is None for step in steps)  # unused.weight, unused.bias
    assert all(grad is not None for step in steps for grad in step[:-2])

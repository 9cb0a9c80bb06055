"""Functional collectives, DeviceMesh and DTensor run on backend "meshcomm" (torch reaches its groups by name from C++)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from tests.torch_backend import harness, programs  # noqa: E402
from tests.torch_backend.programs import floats, ints  # noqa: E402

SIZE = 4


@pytest.fixture(scope="module")
def results() -> list:
    return harness.run(programs.functional_and_mesh, SIZE, "meshcomm")


def test_functional_collectives(results):
    total = sum(floats(r, 4) for r in range(SIZE))
    everyone = [ints(r, 2 * SIZE) for r in range(SIZE)]
    for rank, out in enumerate(results):
        torch.testing.assert_close(torch.tensor(out["all_reduce"]), total)
        torch.testing.assert_close(torch.tensor(out["all_reduce_avg"]), total / SIZE)
        assert out["all_gather_tensor"] == torch.cat([ints(r, 3) for r in range(SIZE)]).tolist()
        assert out["reduce_scatter_tensor"] == sum(everyone)[2 * rank: 2 * rank + 2].tolist()
        assert out["all_to_all_single"] == [rank + 10 * r for r in range(SIZE)]
        assert out["broadcast"] == ints(1, 3).tolist()
        torch.testing.assert_close(out["all_reduce_coalesced"], [sum(floats(r, 2) for r in range(SIZE)).tolist(),
                                                                 sum(floats(r, 3, 1.0) for r in range(SIZE)).tolist()])


def test_device_mesh_dimensions_are_meshcomm_groups(results):
    for rank, out in enumerate(results):
        dp = [r for r in range(SIZE) if r % 2 == rank % 2]
        tp = [r for r in range(SIZE) if r // 2 == rank // 2]
        assert out["mesh_ranks"] == [dp, tp]
        assert out["mesh_backend"] == ["meshcomm", "meshcomm"]
        assert out["mesh_tp_all_reduce"] == sum(ints(r, 3) for r in tp).tolist()
        assert out["mesh_dp_all_reduce"] == sum(ints(r, 2) for r in dp).tolist()


def test_dtensor_shards_gathers_and_reduces(results):
    torch.manual_seed(5)
    full = torch.randn(SIZE * 2, 3)
    for rank, out in enumerate(results):
        rows, cols = rank // 2, rank % 2  # Shard(0) over "dp", Shard(1) over "tp"
        row_block = full.chunk(2, dim=0)[rows]
        assert out["dtensor_local"] == row_block.chunk(2, dim=1)[cols].tolist()
        assert out["dtensor_full"] == full.tolist()
        assert out["dtensor_redistribute"] == full.tolist()
        assert out["dtensor_sum"] == pytest.approx(full.sum().item(), rel=1e-5)

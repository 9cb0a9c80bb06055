"""meshcomm as a Ray collective backend, on a real local Ray: every call against numpy, failures, misuse."""

from __future__ import annotations

import os

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'meshcomm[ray]')")

import meshcomm.ray  # noqa: E402
from ray.util import collective  # noqa: E402

pytestmark = pytest.mark.slow
CALL = 120  # seconds any one ray.get may take


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray for the module, on loopback only; shut down (its processes reaped) at the end."""
    ray.init(num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             configure_logging=False)
    meshcomm.ray.register()
    yield
    ray.shutdown()


@ray.remote(num_cpus=0)
class Worker:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def register(self) -> None:
        meshcomm.ray.register()

    def every_call(self, group: str, n: int, use_torch: bool) -> dict:
        """Each ray.util.collective call on this rank's data; the results, as lists."""
        rank = self.rank
        wrap = (lambda a: __import__("torch").from_numpy(a)) if use_torch else (lambda a: a)
        out = {}
        for name, op in (("sum", collective.types.ReduceOp.SUM), ("product", collective.types.ReduceOp.PRODUCT),
                         ("min", collective.types.ReduceOp.MIN), ("max", collective.types.ReduceOp.MAX)):
            x = wrap(np.arange(5, dtype=np.float64) + rank + 1)
            collective.allreduce(x, group_name=group, op=op)
            out[f"allreduce_{name}"] = x.tolist()
        b = wrap(np.full(3, rank, dtype=np.int32))
        collective.broadcast(b, src_rank=n - 1, group_name=group)
        out["broadcast"] = b.tolist()
        gathered = [wrap(np.zeros(2, dtype=np.int64)) for _ in range(n)]
        collective.allgather(gathered, wrap(np.array([rank, 10 * rank], dtype=np.int64)), group_name=group)
        out["allgather"] = [g.tolist() for g in gathered]
        pieces = [wrap(np.full(2, rank * 100 + r, dtype=np.float32)) for r in range(n)]
        mine = wrap(np.zeros(2, dtype=np.float32))
        collective.reducescatter(mine, pieces, group_name=group)
        out["reducescatter"] = mine.tolist()
        r = wrap(np.full(4, rank + 1, dtype=np.float32))
        collective.reduce(r, dst_rank=0, group_name=group)
        out["reduce"] = r.tolist()
        collective.barrier(group_name=group)
        if n > 1:
            ring = wrap(np.zeros(3, dtype=np.int16))
            if rank % 2 == 0:
                collective.send(wrap(np.full(3, rank, dtype=np.int16)), (rank + 1) % n, group_name=group)
                collective.recv(ring, (rank - 1) % n, group_name=group)
            else:
                collective.recv(ring, (rank - 1) % n, group_name=group)
                collective.send(wrap(np.full(3, rank, dtype=np.int16)), (rank + 1) % n, group_name=group)
            out["ring"] = ring.tolist()
        return out

    def join_with_ray(self, n: int, group: str) -> int:
        """The group Ray declared from the driver (create_collective_group) is made here at first use."""
        x = np.ones(1)
        collective.allreduce(x, group_name=group)
        return int(x[0])

    def allreduce_waiting(self, group: str) -> tuple[str, str]:
        try:
            collective.allreduce(np.ones(8), group_name=group)
        except Exception as exc:  # noqa: BLE001 (the test reads which error, and its message)
            return type(exc).__name__, str(exc)
        return "no error", ""

    def pid(self) -> int:
        return os.getpid()

    def leave(self, group: str) -> None:
        collective.destroy_collective_group(group)


def _expected(n: int) -> list[dict]:
    ranks = range(n)
    inputs = [np.arange(5, dtype=np.float64) + r + 1 for r in ranks]
    expected = []
    for rank in ranks:
        e = {"allreduce_sum": sum(inputs).tolist(), "allreduce_product": np.prod(inputs, axis=0).tolist(),
             "allreduce_min": np.min(inputs, axis=0).tolist(), "allreduce_max": np.max(inputs, axis=0).tolist(),
             "broadcast": [n - 1] * 3, "allgather": [[r, 10 * r] for r in ranks],
             "reducescatter": [float(sum(q * 100 + rank for q in ranks))] * 2,
             "reduce": [float(sum(q + 1 for q in ranks))] * 4 if rank == 0 else [float(rank + 1)] * 4}
        if n > 1:
            e["ring"] = [(rank - 1) % n] * 3
        expected.append(e)
    return expected


def _torch_importable() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("use_torch", [False, True])
def test_every_call_matches_numpy(n: int, use_torch: bool) -> None:
    if use_torch and not _torch_importable():
        pytest.skip("torch is not installed")
    actors = [Worker.remote(r) for r in range(n)]
    group = f"every-{n}-{use_torch}"
    meshcomm.ray.create_group(actors, group_name=group, timeout=60)
    try:
        results = ray.get([a.every_call.remote(group, n, use_torch) for a in actors], timeout=CALL)
    finally:
        meshcomm.ray.destroy_group(actors, group)
    assert results == _expected(n)


def test_a_group_declared_with_ray_s_own_create_collective_group_runs_on_meshcomm() -> None:
    actors = [Worker.remote(r) for r in range(3)]
    ray.get([a.register.remote() for a in actors], timeout=CALL)
    collective.create_collective_group(actors, 3, [0, 1, 2], backend=meshcomm.ray.BACKEND, group_name="declared")
    try:
        assert ray.get([a.join_with_ray.remote(3, "declared") for a in actors], timeout=CALL) == [3, 3, 3]
    finally:
        ray.get([a.leave.remote("declared") for a in actors], timeout=CALL)  # also ends Ray's record of it


def test_a_killed_actor_is_named_by_rank_and_actor_in_every_survivor_s_error() -> None:
    actors = [Worker.remote(r) for r in range(3)]
    meshcomm.ray.create_group(actors, group_name="doomed", timeout=60)
    victim_id = actors[2]._actor_id.hex()
    waiting = [a.allreduce_waiting.remote("doomed") for a in actors[:2]]
    ray.wait(waiting, timeout=1.0)  # the survivors are inside the allreduce, waiting for rank 2
    ray.kill(actors[2])
    errors = ray.get(waiting, timeout=CALL)
    for kind, message in errors:
        # PeerLostError, not the group's 60 s timeout: the death itself was noticed.
        assert kind == "PeerLostError", message
        assert "rank 2" in message and victim_id in message, message
    meshcomm.ray.destroy_group(actors[:2], "doomed")


def test_a_duplicate_group_name_is_refused_naming_it() -> None:
    actors = [Worker.remote(r) for r in range(2)]
    meshcomm.ray.create_group(actors, group_name="twice", timeout=60)
    try:
        with pytest.raises(ValueError, match="'twice' already exists"):
            meshcomm.ray.create_group([Worker.remote(r) for r in range(2)], group_name="twice", timeout=60)
    finally:
        meshcomm.ray.destroy_group(actors, "twice")
    meshcomm.ray.create_group(actors, group_name="twice", timeout=60)  # free again once destroyed
    meshcomm.ray.destroy_group(actors, "twice")


def test_a_world_size_that_does_not_match_the_actors_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="world_size 3 does not match the 2 actors given for group 'sized'"):
        meshcomm.ray.create_group([Worker.remote(r) for r in range(2)], group_name="sized", world_size=3)


def test_bad_arguments_to_create_group_are_named() -> None:
    with pytest.raises(ValueError, match="actors must be a non-empty list"):
        meshcomm.ray.create_group([], group_name="empty")
    with pytest.raises(TypeError, match="actors must be Ray actor handles, got a int"):
        meshcomm.ray.create_group([1, 2], group_name="ints")
    with pytest.raises(ValueError, match="group_name must be a non-empty str"):
        meshcomm.ray.create_group([Worker.remote(0)], group_name="")

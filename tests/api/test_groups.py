"""Sub-groups, splits, device meshes and object collectives on real processes."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist


def even_odd_groups() -> list:
    """Two interleaved groups run collectives concurrently (async) without crossing messages."""
    rank, size = dist.get_rank(), dist.get_world_size()
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    odds = dist.new_group([r for r in range(size) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    members = dist.get_process_group_ranks(mine)
    x = np.full(4, rank, np.int64)
    w1 = dist.all_reduce(x, group=mine, async_op=True)
    y = np.full(4, 1, np.int64)
    w2 = dist.all_reduce(y, async_op=True)  # the world at the same time
    w1.wait()
    w2.wait()
    assert (x == sum(members)).all() and (y == size).all()
    assert dist.get_rank(mine) == members.index(rank)
    assert dist.get_world_size(mine) == len(members)
    assert dist.get_global_rank(mine, 0) == members[0]
    assert dist.get_group_rank(mine, rank) == members.index(rank)
    other = odds if mine is evens else evens
    if size > 1:
        assert other is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(other) == -1
    b = np.zeros(2) if rank != members[-1] else np.full(2, 7.0)
    dist.broadcast(b, src=members[-1], group=mine)
    return b.tolist()


def split_by_colour() -> tuple:
    rank, size = dist.get_rank(), dist.get_world_size()
    # colour by rank % 2, ordered by descending rank (key = -rank)
    group = dist.split(rank % 2, key=-rank)
    members = dist.get_process_group_ranks(group)
    assert members == sorted([r for r in range(size) if r % 2 == rank % 2], reverse=True)
    x = np.array([rank], np.int64)
    dist.all_reduce(x, group=group)
    none = dist.split(None if rank == 0 else 1)
    return int(x[0]), none is None if rank == 0 else dist.get_world_size(none)


def subgroups_and_split_group() -> int:
    size = dist.get_world_size()
    mine, groups = dist.new_subgroups(group_size=1)
    assert len(groups) == size and dist.get_world_size(mine) == 1
    split = dist.split_group(split_ranks=[list(range(size))])
    x = np.ones(1)
    dist.all_reduce(x, group=split)
    return int(x[0])


def device_mesh_2d() -> tuple:
    rank, size = dist.get_rank(), dist.get_world_size()
    mesh = dist.init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    x = np.array([rank], np.int64)
    dist.all_reduce(x, group=mesh.get_group("tp"))
    y = np.array([rank], np.int64)
    dist.all_reduce(y, group=dp.get_group())
    assert mesh.size() == size and mesh.size("tp") == size // 2 and mesh.ndim == 2
    assert mesh.get_local_rank("tp") == rank % (size // 2) and tp.get_local_rank() == rank % (size // 2)
    assert mesh.get_local_rank("dp") == rank // (size // 2)
    from meshcomm.device_mesh import init_device_mesh as again

    mesh3 = again("cpu", (1, 2, size // 2), mesh_dim_names=("pp", "dp", "tp"))
    assert mesh3["dp", "tp"].shape == (2, size // 2)
    return int(x[0]), int(y[0])


def objects() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    payload = {"rank": rank, "array": np.arange(rank + 3, dtype=np.float32), "text": "x" * rank}
    gathered = [None] * size
    dist.all_gather_object(gathered, payload)
    assert [g["rank"] for g in gathered] == list(range(size))
    assert all(np.array_equal(g["array"], np.arange(r + 3)) for r, g in enumerate(gathered))
    items = [{"from": 0, "n": 1}, [1, 2, 3]] if rank == 0 else [None, None]
    dist.broadcast_object_list(items, src=0)
    assert items == [{"from": 0, "n": 1}, [1, 2, 3]]
    out = [None] * size if rank == size - 1 else None
    dist.gather_object(("hello", rank), out, dst=size - 1)
    assert rank != size - 1 or out == [("hello", r) for r in range(size)]
    received = [None]
    dist.scatter_object_list(received, [f"for {r}" * (r + 1) for r in range(size)] if rank == 0 else None, src=0)
    assert received[0] == f"for {rank}" * (rank + 1)
    if size > 1:
        if rank == 0:
            dist.send_object_list([{"big": np.ones(100_000)}], dst=1)
        elif rank == 1:
            got = [None]
            assert dist.recv_object_list(got) == 0 and got[0]["big"].sum() == 100_000
    return True


def test_interleaved_groups_do_not_cross(cluster):
    results = cluster.run(even_odd_groups)
    size = cluster.size
    for rank, value in enumerate(results):
        members = [r for r in range(size) if r % 2 == rank % 2]
        assert value == [7.0, 7.0], (rank, members)


def test_split_by_colour_orders_by_key(cluster):
    results = cluster.run(split_by_colour)
    for rank, (total, extra) in enumerate(results):
        assert total == sum(r for r in range(cluster.size) if r % 2 == rank % 2)
        assert extra is True if rank == 0 else extra == cluster.size - 1


def test_new_subgroups_and_split_group(cluster):
    assert cluster.run(subgroups_and_split_group) == [cluster.size] * cluster.size


@pytest.mark.parametrize("size", [4, 8])
def test_two_dimensional_device_mesh(size):
    from tests.ranks import get_cluster

    results = get_cluster(size).run(device_mesh_2d)
    half = size // 2
    for rank, (tp_sum, dp_sum) in enumerate(results):
        row = rank // half
        assert tp_sum == sum(range(row * half, row * half + half))
        assert dp_sum == (rank % half) * 2 + half


def test_object_collectives(cluster):
    assert all(cluster.run(objects))


def test_eight_ranks_groups_splits_and_objects(cluster8):
    for rank, value in enumerate(cluster8.run(even_odd_groups)):
        assert value == [7.0, 7.0], rank
    for rank, (total, extra) in enumerate(cluster8.run(split_by_colour)):
        assert total == sum(r for r in range(8) if r % 2 == rank % 2)
        assert extra is True if rank == 0 else extra == 7
    assert cluster8.run(subgroups_and_split_group) == [8] * 8
    assert all(cluster8.run(objects))


def _ordered_and_timed() -> list:
    import datetime

    n = dist.get_world_size()
    group = dist.new_group(list(reversed(range(n))))  # torch puts a group's ranks in rank order
    x = np.ones(1)
    dist.all_reduce(x, group=dist.group.WORLD, timeout=datetime.timedelta(seconds=30))  # torch's spellings
    work = dist.all_reduce(x, async_op=True)
    work.wait(datetime.timedelta(seconds=30))
    outsider_destroyed = dist.destroy_process_group(dist.GroupMember.NON_GROUP_MEMBER)
    return [dist.get_process_group_ranks(group), dist.get_group_rank(group, dist.get_rank()), float(x[0]),
            outsider_destroyed]


def test_new_group_puts_ranks_in_order_and_timeouts_take_timedeltas_as_in_torch(cluster) -> None:
    n = cluster.size
    for rank, got in enumerate(cluster.run(_ordered_and_timed)):
        assert got == [list(range(n)), rank, float(n * n), None]


def test_an_empty_enumeration_of_subgroups_is_refused() -> None:
    with pytest.raises(ValueError, match="ranks_per_subgroup_list must not be empty"):
        dist.new_subgroups_by_enumeration([])

"""Every added algorithm, picked through MESHCOMM_ALGO, computes its collective on 3 and 4 real ranks."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist
from meshcomm import ReduceOp
from tests.ranks import Cluster

# One override per cluster; each names at most one algorithm per collective.
OVERRIDES = {
    "rabenseifner": "broadcast:scatter_ring;reduce:rabenseifner;all_reduce:rabenseifner;"
                    "all_gather:recursive_doubling;reduce_scatter:recursive_halving;all_to_all:bruck;barrier:tree",
    "binomial": "broadcast:scatter_recursive_doubling;all_reduce:binomial;all_gather:bruck;"
                "reduce_scatter:pairwise;all_to_all:scattered",
    "double_binary_tree": "all_reduce:double_binary_tree",
    "direct": "broadcast:direct;reduce:direct;all_reduce:direct;all_gather:direct;reduce_scatter:direct;"
              "all_to_all:direct;barrier:direct",
    "hierarchical": "broadcast:hierarchical;all_reduce:hierarchical;all_gather:hierarchical;"
                    "reduce_scatter:hierarchical",
}


def values(rank: int, count: int, salt: int = 0) -> np.ndarray:
    return ((np.arange(count) * 7 + rank * 3 + salt) % 11 + 1).astype(np.int64)


def chosen() -> dict[str, str]:
    """The algorithm the runtime picks for each collective, with the override in force."""
    from meshcomm.algorithms.problem import Problem
    from meshcomm.api.state import runtime

    n = dist.get_world_size()
    itemsize = np.dtype(np.int64).itemsize
    problems = [Problem("broadcast", n, (1,)), Problem("reduce", n, (1,)), Problem("all_reduce", n, (1,)),
                Problem("all_gather", n, (1,) * n), Problem("reduce_scatter", n, (1,) * n),
                Problem("all_to_all", n, (1,) * n * n), Problem("barrier", n, ())]
    return {p.collective: runtime().world.algorithm_for(p, itemsize) for p in problems}


def every_collective() -> list[str]:
    """Run each collective on awkward counts and return the names of those that disagree with numpy."""
    rank, n = dist.get_rank(), dist.get_world_size()
    wrong = []
    for count in (0, n - 1, 1001):
        x = values(rank, count)
        dist.all_reduce(x)
        if not np.array_equal(x, sum(values(q, count) for q in range(n))):
            wrong.append(f"all_reduce {count}")
        y = values(rank, count, salt=1)
        dist.all_reduce(y, op=ReduceOp.MAX)
        if not np.array_equal(y, np.max([values(q, count, salt=1) for q in range(n)], axis=0)):
            wrong.append(f"all_reduce max {count}")
    for root in range(n):
        z = values(rank, 13)
        dist.reduce(z, dst=root)
        if rank == root and not np.array_equal(z, sum(values(q, 13) for q in range(n))):
            wrong.append(f"reduce root {root}")
        b = values(rank, 29)
        dist.broadcast(b, src=root)
        if not np.array_equal(b, values(root, 29)):
            wrong.append(f"broadcast root {root}")
    gathered = [np.zeros(q + 1, np.int64) for q in range(n)]  # uneven: rank q gives q + 1 elements
    dist.all_gather(gathered, values(rank, rank + 1))
    if not all(np.array_equal(gathered[q], values(q, q + 1)) for q in range(n)):
        wrong.append("all_gather")
    out = np.zeros(rank + 1, np.int64)
    dist.reduce_scatter(out, [values(rank, q + 1, salt=q) for q in range(n)])
    if not np.array_equal(out, sum(values(q, rank + 1, salt=rank) for q in range(n))):
        wrong.append("reduce_scatter")
    send = [(rank + j) % 3 for j in range(n)]  # rank q sends (q + j) % 3 elements to rank j
    recv = [(q + rank) % 3 for q in range(n)]
    source = np.concatenate([np.full(send[j], 100 * rank + j, np.int64) for j in range(n)])
    target = np.zeros(sum(recv), np.int64)
    dist.all_to_all_single(target, source, output_split_sizes=recv, input_split_sizes=send)
    expected = np.concatenate([np.full(recv[q], 100 * q + rank, np.int64) for q in range(n)])
    if not np.array_equal(target, expected):
        wrong.append("all_to_all")
    dist.barrier()
    return wrong


# Fake hosts (MESHCOMM_HOST_ID per rank) give the node-aware algorithms several hosts of unequal sizes.
HOSTS = {3: ["a", "b", "b"], 4: ["a", "b", "a", "b"]}


@pytest.mark.parametrize("size", [3, 4])
@pytest.mark.parametrize("name", list(OVERRIDES))
def test_overridden_algorithms_match_numpy_on_real_ranks(name: str, size: int) -> None:
    override = OVERRIDES[name]
    env = {"MESHCOMM_ALGO": override}
    if name == "hierarchical":
        env["MESHCOMM_HOST_ID"] = HOSTS[size]
    cluster = Cluster(size, env=env)
    try:
        picked = cluster.run(chosen)
        named = dict(part.split(":") for part in override.split(";"))
        assert all({c: p[c] for c in named} == named for p in picked)
        assert cluster.run(every_collective, timeout=60) == [[] for _ in range(size)]
    finally:
        cluster.close()

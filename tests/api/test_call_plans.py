"""What a group keeps per kind of call (its plan, the checked problem and reduction) never serves another kind,
and never lets bad arguments through: they raise as on a first call, before any byte moves."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist
from meshcomm import ReduceOp
from tests.api.test_validation import EXPECTED, _message
from tests.ranks import get_cluster


def kept_plans(group=None) -> int:
    from meshcomm.api.state import resolve_group

    return len(resolve_group(group)._plans)


def last_call() -> str:
    """The flight recorder's words for this rank's latest collective (from the fingerprint its plan holds)."""
    from meshcomm.api.state import runtime
    from meshcomm.trace.flight_recorder import describe

    return describe(runtime().recorder.entries()[-1])["call"]


def calls_that_differ_in_one_thing() -> list:
    """Calls one after the other that differ in shape, dtype, op, root or group; twice, the second
    round on the plans the first one made. Returns what came out wrong, and the plans kept after each round."""
    rank, n = dist.get_rank(), dist.get_world_size()
    pair = dist.new_group([0, 1])  # every rank makes it; ranks 0 and 1 are its members
    wrong: list = []

    def check(what: str, got: np.ndarray, expected, call: str | None = None) -> None:
        if not np.array_equal(got, expected):
            wrong.append(f"{what}: {got.tolist()}")
        if call is not None and last_call() != call:
            wrong.append(f"{what} recorded as {last_call()}")

    kept = []
    for _ in range(2):
        for count in (2, 3):
            x = np.full(count, rank + 1, np.float32)
            dist.all_reduce(x)
            check(f"all_reduce sum float32 x{count}", x, np.full(count, n * (n + 1) / 2),
                  f"all_reduce(float32, {count} elements, op=sum)")
        x = np.full(2, rank + 1, np.float64)
        dist.all_reduce(x)
        check("all_reduce sum float64", x, np.full(2, n * (n + 1) / 2), "all_reduce(float64, 2 elements, op=sum)")
        x = np.full(2, rank + 1, np.int16)
        dist.all_reduce(x, op=ReduceOp.MAX)
        check("all_reduce max int16", x, np.full(2, n), "all_reduce(int16, 2 elements, op=max)")
        x = np.full(2, rank + 1, np.float32)
        dist.all_reduce(x, op=ReduceOp.PRODUCT)
        check("all_reduce product", x, np.full(2, np.prod(np.arange(1, n + 1))),
              "all_reduce(float32, 2 elements, op=product)")
        x = np.full(2, rank + 1, np.float32)
        dist.all_reduce(x, op=ReduceOp.AVG)
        check("all_reduce avg", x, np.full(2, (n + 1) / 2))
        x = np.full(2, rank + 1, np.float32)
        dist.all_reduce(x, op=ReduceOp.premul_sum(2.0))
        check("all_reduce premul_sum", x, np.full(2, n * (n + 1)))
        for root in range(n):
            b = np.full(2, rank, np.int64)
            dist.broadcast(b, src=root)
            check(f"broadcast root {root}", b, np.full(2, root), f"broadcast(int64, 2 elements, root={root})")
            z = np.full(2, rank + 1, np.int64)
            dist.reduce(z, dst=root)
            check(f"reduce root {root}", z, np.full(2, n * (n + 1) // 2 if rank == root else rank + 1))
        for count in (1, 2):
            out = np.zeros(count * n, np.float32)
            dist.all_gather_into_tensor(out, np.full(count, rank, np.float32))
            check(f"all_gather_into_tensor x{count}", out, np.repeat(np.arange(n), count))
            mine = np.zeros(count, np.float32)
            dist.reduce_scatter_tensor(mine, np.arange(count * n, dtype=np.float32) + rank)
            expected = n * (np.arange(count) + rank * count) + n * (n - 1) / 2
            check(f"reduce_scatter_tensor x{count}", mine, expected)
            got = np.zeros(count * n, np.int64)
            dist.all_to_all_single(got, np.arange(count * n, dtype=np.int64) + 100 * rank)
            check(f"all_to_all_single x{count}", got,
                  np.concatenate([np.arange(count) + rank * count + 100 * q for q in range(n)]))
        if rank < 2:
            y = np.full(2, rank + 1, np.float32)
            dist.all_reduce(y, group=pair)
            check("all_reduce on a sub-group", y, np.full(2, 3))
            y = np.full(2, rank + 1, np.float32)
            dist.broadcast(y, src=1, group=pair)
            check("broadcast on a sub-group", y, np.full(2, 2))
        dist.barrier()
        kept.append(kept_plans())
    return [wrong, kept[0] == kept[1]]


@pytest.mark.parametrize("size", [2, 3])
def test_a_kept_plan_serves_only_calls_of_its_shape_dtype_op_root_and_group(size: int) -> None:
    assert get_cluster(size).run(calls_that_differ_in_one_thing) == [[[], True]] * size


def bad_calls_after_good_ones(algorithm) -> dict:
    """The calls of test_validation, each after good calls of the same collective, dtype and sizes."""
    size = dist.get_world_size()
    f32 = np.zeros(4, np.float32)
    out = np.zeros(4 * size, np.float32)
    for _ in range(2):
        dist.all_reduce(f32, algorithm=algorithm)
        dist.all_reduce(np.zeros(2, np.int32), algorithm=algorithm)
        dist.all_reduce(f32, op=ReduceOp.AVG, algorithm=algorithm)
        dist.broadcast(f32, src=0, algorithm=algorithm)
        dist.all_gather_into_tensor(out, f32, algorithm=algorithm)
        dist.reduce_scatter_tensor(f32, out, algorithm=algorithm)
        dist.all_to_all_single(np.zeros(size), np.zeros(size), algorithm=algorithm)
    results = {
        "root outside": _message(dist.broadcast, f32, src=size + 3, algorithm=algorithm),
        "bitwise on float": _message(dist.all_reduce, f32, op=ReduceOp.BAND, algorithm=algorithm),
        "avg on int": _message(dist.all_reduce, np.zeros(2, np.int32), op=ReduceOp.AVG, algorithm=algorithm),
        "bad op": _message(dist.all_reduce, f32, op="median", algorithm=algorithm),
        "dtype mismatch": _message(dist.all_gather_into_tensor, np.zeros(4 * size, np.float64), f32,
                                   algorithm=algorithm),
        "output too small": _message(dist.all_gather_into_tensor, out[1:], f32, algorithm=algorithm),
        "reduce_scatter input size": _message(dist.reduce_scatter_tensor, f32, np.zeros(4 * size + 1, np.float32),
                                              algorithm=algorithm),
        "splits do not add up": _message(dist.all_to_all_single, np.zeros(size), np.zeros(size),
                                         input_split_sizes=[1] * (size + 1), algorithm=algorithm),
        "read-only output": _message(dist.all_reduce, np.frombuffer(b"\0" * 16, dtype=np.float32),
                                     algorithm=algorithm),
        "object dtype": _message(dist.all_reduce, np.array(["a"] * 4, dtype=object), algorithm=algorithm),
        "unknown algorithm": _message(dist.all_reduce, f32, algorithm="nonesuch"),
    }
    x = np.ones(3)
    dist.all_reduce(x, algorithm=algorithm)  # nothing moved, nothing is stuck
    results["afterwards"] = float(x[0])
    return results


@pytest.mark.parametrize("algorithm", [None, "direct"])
def test_bad_arguments_after_good_calls_of_the_same_kind_still_raise(algorithm) -> None:
    cluster = get_cluster(2)
    for rank, results in enumerate(cluster.run(bad_calls_after_good_ones, algorithm)):
        assert results.pop("afterwards") == cluster.size
        for case, message in results.items():
            kind, words = EXPECTED.get(case, ("ValueError", "unknown all_reduce algorithm 'nonesuch'"))
            assert message.startswith(kind) and words in message, (rank, case, message)


def plans_under_debug() -> int:
    x = np.zeros(2, np.float32)
    for _ in range(3):
        dist.all_reduce(x)
    return kept_plans()


def test_no_plan_is_kept_under_meshcomm_debug_so_every_call_prints_its_choice() -> None:
    from tests.ranks import Cluster

    cluster = Cluster(2, env={"MESHCOMM_DEBUG": "INFO"})
    try:
        assert cluster.run(plans_under_debug) == [0, 0]
    finally:
        cluster.close()

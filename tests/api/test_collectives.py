"""Every collective of the torch.distributed face, on real processes, against a local reference."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist
from meshcomm import ReduceOp

REFERENCE = {
    "sum": lambda xs: np.sum(xs, axis=0),
    "product": lambda xs: np.prod(xs, axis=0),
    "min": lambda xs: np.min(xs, axis=0),
    "max": lambda xs: np.max(xs, axis=0),
    "band": lambda xs: np.bitwise_and.reduce(xs, axis=0),
    "bor": lambda xs: np.bitwise_or.reduce(xs, axis=0),
    "bxor": lambda xs: np.bitwise_xor.reduce(xs, axis=0),
}
OPS = {"sum": ReduceOp.SUM, "product": ReduceOp.PRODUCT, "min": ReduceOp.MIN, "max": ReduceOp.MAX,
       "band": ReduceOp.BAND, "bor": ReduceOp.BOR, "bxor": ReduceOp.BXOR}


def data(rank: int, count: int, dtype, salt: int = 0) -> np.ndarray:
    values = (np.arange(count) * 3 + rank * 5 + salt) % 7 + 1
    return values.astype(dtype)


def everyone(size: int, count: int, dtype, salt: int = 0) -> np.ndarray:
    return np.stack([data(r, count, dtype, salt) for r in range(size)])


def all_reduce_case(op_name: str, dtype, count: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    x = data(rank, count, dtype)
    dist.all_reduce(x, op=OPS[op_name])
    return bool(np.array_equal(x, REFERENCE[op_name](everyone(size, count, dtype))))


def reduce_case(op_name: str, dtype, count: int, root: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    x = data(rank, count, dtype)
    dist.reduce(x, dst=root, op=OPS[op_name])
    expected = REFERENCE[op_name](everyone(size, count, dtype)) if rank == root else data(rank, count, dtype)
    return bool(np.array_equal(x, expected))


def broadcast_case(root: int, count: int) -> bool:
    rank = dist.get_rank()
    x = data(rank, count, np.int32)
    dist.broadcast(x, src=root)
    return bool(np.array_equal(x, data(root, count, np.int32)))


def all_gather_cases(count: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    outs = [np.zeros(count, np.float64) for _ in range(size)]
    dist.all_gather(outs, data(rank, count, np.float64))
    ok = all(np.array_equal(outs[r], data(r, count, np.float64)) for r in range(size))
    flat = np.zeros((size, count), np.float64)
    dist.all_gather_into_tensor(flat, data(rank, count, np.float64))
    return ok and bool(np.array_equal(flat, everyone(size, count, np.float64)))


def reduce_scatter_cases(count: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    full = data(rank, count * size, np.int64)
    out = np.zeros(count, np.int64)
    dist.reduce_scatter_tensor(out, full)
    expected = everyone(size, count * size, np.int64).sum(axis=0)[rank * count : (rank + 1) * count]
    ok = np.array_equal(out, expected)
    # list form with uneven pieces: piece r has r + 1 elements
    pieces = [data(rank, r + 1, np.int64, salt=r) for r in range(size)]
    out2 = np.zeros(rank + 1, np.int64)
    dist.reduce_scatter(out2, pieces, op=ReduceOp.MAX)
    expected2 = np.max([data(q, rank + 1, np.int64, salt=rank) for q in range(size)], axis=0)
    return bool(ok and np.array_equal(out2, expected2))


def gather_scatter_cases(root: int) -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    mine = data(rank, 6, np.float32)
    bucket = [np.zeros(6, np.float32) for _ in range(size)] if rank == root else None
    dist.gather(mine, bucket, dst=root)
    ok = rank != root or all(np.array_equal(bucket[r], data(r, 6, np.float32)) for r in range(size))
    pieces = [data(r, 4, np.float32, salt=9) for r in range(size)] if rank == root else None
    out = np.zeros(4, np.float32)
    dist.scatter(out, pieces, src=root)
    return bool(ok and np.array_equal(out, data(rank, 4, np.float32, salt=9)))


SPAN_COUNT = 70_000  # float32s per block: the blocks hold more than collectives._SPAN_FROM_BYTES in all


def blocks_of(layout: str, size: int, fill: float) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """(the array they are views of, or None) and `size` blocks of SPAN_COUNT float32s laid out as `layout` says."""
    if layout == "separate":
        return None, [np.full(SPAN_COUNT, fill, np.float32) for _ in range(size)]
    stride = SPAN_COUNT + 100 if layout == "gapped" else SPAN_COUNT  # 100 elements between gapped blocks
    whole = np.full(size * stride, fill, np.float32)
    at = range(size - 1, -1, -1) if layout == "reversed" else range(size)
    return whole, [whole[i * stride : i * stride + SPAN_COUNT] for i in at]


def gather_scatter_blocks_cases(root: int, layout: str, in_place: bool) -> bool:
    """A gather into and a scatter from blocks laid out as `layout` says; with `in_place`, the root's own tensor is
    its block of the list. Results, the list's untouched memory and the scatter's list are checked."""
    rank, size = dist.get_rank(), dist.get_world_size()
    whole, bucket = blocks_of(layout, size, -1.0)
    mine = data(rank, SPAN_COUNT, np.float32)
    if rank == root and in_place:
        bucket[root][...] = mine
        mine = bucket[root]
    before = None if whole is None else whole.copy()
    dist.gather(mine, bucket if rank == root else None, dst=root)
    ok = True
    if rank == root:
        ok = all(np.array_equal(bucket[r], data(r, SPAN_COUNT, np.float32)) for r in range(size))
        if whole is not None:  # nothing of the array but the blocks is written
            outside = np.ones(whole.size, bool)
            for block in bucket:
                start = (block.__array_interface__["data"][0] - whole.__array_interface__["data"][0]) // 4
                outside[start : start + block.size] = False
            ok = ok and np.array_equal(whole[outside], before[outside])
    whole, pieces = blocks_of(layout, size, 0.0)
    for r, piece in enumerate(pieces):
        piece[...] = data(r, SPAN_COUNT, np.float32, salt=5)
    sent = None if whole is None else whole.copy()
    out = pieces[root] if rank == root and in_place else np.zeros(SPAN_COUNT, np.float32)
    dist.scatter(out, pieces if rank == root else None, src=root)
    ok = ok and np.array_equal(out, data(rank, SPAN_COUNT, np.float32, salt=5))
    return bool(ok and (rank != root or whole is None or np.array_equal(whole, sent)))


def all_to_all_cases() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    # even splits: rows of a (size*2, 3) matrix
    x = np.arange(size * 2 * 3, dtype=np.int32).reshape(size * 2, 3) + 1000 * rank
    y = np.zeros_like(x)
    dist.all_to_all_single(y, x)
    expected = np.concatenate([(np.arange(size * 6).reshape(size * 2, 3) + 1000 * q)[2 * rank : 2 * rank + 2]
                               for q in range(size)])
    ok = np.array_equal(y, expected)
    # uneven: rank q sends (q + j) % 3 rows to rank j
    send = [(rank + j) % 3 for j in range(size)]
    recv = [(q + rank) % 3 for q in range(size)]
    x2 = np.repeat(np.arange(size, dtype=np.float64) + 10 * rank, send)[:, None] * np.ones((1, 2))
    y2 = np.zeros((sum(recv), 2))
    dist.all_to_all_single(y2, x2, output_split_sizes=recv, input_split_sizes=send)
    expected2 = np.concatenate([np.full(((q + rank) % 3, 2), rank + 10.0 * q) for q in range(size)])
    ok = ok and np.array_equal(y2, expected2)
    # list form
    outs = [np.zeros(2, np.int16) for _ in range(size)]
    dist.all_to_all(outs, [np.full(2, rank * 10 + j, np.int16) for j in range(size)])
    return bool(ok and all(np.array_equal(outs[q], np.full(2, q * 10 + rank)) for q in range(size)))


def avg_and_premul() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    x = np.full(5, float(rank), np.float64)
    dist.all_reduce(x, op=ReduceOp.AVG)
    ok = np.allclose(x, (size - 1) / 2)
    y = np.full(3, float(rank + 1), np.float32)
    dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.5))
    return bool(ok and np.allclose(y, 0.5 * size * (size + 1) / 2))


def bool_and_complex_and_float16() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    flags = np.array([rank == 0, True, False])
    dist.all_reduce(flags, op=ReduceOp.MAX)
    c = np.full(3, 1 + 1j * rank, np.complex64)
    dist.all_reduce(c)
    h = np.full(4, 0.5, np.float16)
    dist.all_reduce(h)
    return bool(np.array_equal(flags, [True, True, False]) and np.allclose(c, size + 1j * size * (size - 1) / 2)
                and np.array_equal(h, np.full(4, 0.5 * size, np.float16)))


def bfloat16_via_ml_dtypes_or_storage() -> bool:
    """bfloat16 as raw storage in a uint16-backed ml_dtypes array, when ml_dtypes is installed."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    size = dist.get_world_size()
    x = np.full(8, 1.5, dtype=ml_dtypes.bfloat16)
    dist.all_reduce(x)
    return bool(np.array_equal(x.astype(np.float32), np.full(8, 1.5 * size, np.float32)))


def float8_cases() -> bool:
    """float8 (ml_dtypes' numpy arrays) moves as bytes and reduces in float32, rounded back per step."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rank, size = dist.get_rank(), dist.get_world_size()
    ok = True
    for name in ("float8_e4m3fn", "float8_e5m2"):
        kind = getattr(ml_dtypes, name)
        x = np.full(8, 0.5, dtype=kind)
        dist.all_reduce(x)  # sums of halves up to 2.0 are exact in both formats
        ok &= np.array_equal(x.astype(np.float32), np.full(8, 0.5 * size, np.float32))
        y = np.array([rank, -rank], dtype=kind)
        dist.all_reduce(y, op=ReduceOp.MAX)
        ok &= np.array_equal(y.astype(np.float32), [size - 1, 0])
        out = np.empty(size, dtype=kind)
        dist.all_gather_into_tensor(out, np.array([rank], dtype=kind))
        ok &= np.array_equal(out.astype(np.float32), np.arange(size, dtype=np.float32))
    return bool(ok)


def scan_cases() -> bool:
    rank = dist.get_rank()
    x = np.full(4, rank + 1, np.int64)
    dist.scan(x)
    ok = np.array_equal(x, np.full(4, (rank + 1) * (rank + 2) // 2))
    y = np.full(4, rank + 1, np.int64)
    dist.exscan(y)
    return bool(ok and (rank == 0 or np.array_equal(y, np.full(4, rank * (rank + 1) // 2))))


def async_in_issue_order() -> bool:
    rank, size = dist.get_rank(), dist.get_world_size()
    xs = [np.full(1000, float(i + rank), np.float64) for i in range(5)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    b = np.ones(3) if rank == 0 else np.zeros(3)
    dist.broadcast(b, src=0)  # a blocking call waits for the queue first
    for w in works:
        assert w.wait(timeout=30)
        assert w.is_completed() and w.exception() is None
    base = sum(range(size))
    return all(np.allclose(x, i * size + base) for i, x in enumerate(xs)) and bool((b == 1).all())


def barrier_case() -> bool:
    dist.barrier()
    work = dist.barrier(async_op=True)
    return work.wait(timeout=30)


@pytest.mark.parametrize("op_name", list(OPS))
def test_all_reduce_every_op_on_integers(cluster, op_name):
    assert all(cluster.run(all_reduce_case, op_name, np.int32, 13))


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("count", [0, 1, 7, 100_003])
def test_all_reduce_dtypes_and_uneven_counts(cluster, dtype, count):
    assert all(cluster.run(all_reduce_case, "sum", dtype, count))


def test_all_reduce_min_max_on_floats(cluster):
    assert all(cluster.run(all_reduce_case, "min", np.float64, 9))
    assert all(cluster.run(all_reduce_case, "max", np.float32, 9))


@pytest.mark.parametrize("op_name", ["sum", "max", "bxor"])
def test_reduce_to_every_root_leaves_other_ranks_unchanged(cluster, op_name):
    for root in range(cluster.size):
        assert all(cluster.run(reduce_case, op_name, np.int64, 11, root))


@pytest.mark.parametrize("count", [0, 1, 1000])
def test_broadcast_from_every_root(cluster, count):
    for root in range(cluster.size):
        assert all(cluster.run(broadcast_case, root, count))


@pytest.mark.parametrize("count", [0, 1, 5])
def test_all_gather_list_and_tensor_forms(cluster, count):
    assert all(cluster.run(all_gather_cases, count))


@pytest.mark.parametrize("count", [1, 6])
def test_reduce_scatter_tensor_and_uneven_list_form(cluster, count):
    assert all(cluster.run(reduce_scatter_cases, count))


def test_gather_and_scatter_at_every_root(cluster):
    for root in range(cluster.size):
        assert all(cluster.run(gather_scatter_cases, root))


@pytest.mark.parametrize("layout", ["in_order", "reversed", "gapped", "separate"])
@pytest.mark.parametrize("in_place", [False, True])
def test_gather_and_scatter_of_large_blocks_however_they_lie(cluster, layout, in_place):
    for root in range(cluster.size):
        assert all(cluster.run(gather_scatter_blocks_cases, root, layout, in_place))


def test_gather_and_scatter_take_blocks_lying_one_after_another_as_one_span():
    from meshcomm.api.collectives import _one_span
    from meshcomm.api.tensors import as_buffer

    f4 = np.dtype(np.float32)
    whole = np.arange(3 * SPAN_COUNT, dtype=np.float32)
    thirds = [as_buffer(whole[i * SPAN_COUNT : (i + 1) * SPAN_COUNT], "block") for i in range(3)]
    span = _one_span(thirds, f4)
    assert span is not None and span.size == whole.size and np.shares_memory(span, whole)
    assert np.array_equal(span, whole) and span.flags.writeable
    assert _one_span(thirds[::-1], f4) is None  # out of order
    assert _one_span([thirds[0], thirds[2]], f4) is None  # a gap
    swapped = whole.astype(">f4")  # the same dtype name in the other byte order
    assert _one_span([as_buffer(swapped[i * SPAN_COUNT : (i + 1) * SPAN_COUNT], "block") for i in range(3)],
                     f4) is None
    small = np.arange(30, dtype=np.float32)
    assert _one_span([as_buffer(small[:15], "block"), as_buffer(small[15:], "block")], f4) is None  # not worth it
    copied = as_buffer(whole[: 2 * SPAN_COUNT].reshape(2, SPAN_COUNT)[:, ::2], "block", writable=True)
    assert copied.writeback is not None and _one_span([copied, thirds[2]], f4) is None  # a copy is not the user's
    read_only = whole[:]
    read_only.flags.writeable = False
    halves = [as_buffer(read_only[i * SPAN_COUNT : (i + 1) * SPAN_COUNT], "block") for i in range(2)]
    assert not _one_span(halves, f4).flags.writeable


def test_all_to_all_even_uneven_and_list(cluster):
    assert all(cluster.run(all_to_all_cases))


def test_avg_and_premul_sum(cluster):
    assert all(cluster.run(avg_and_premul))


def test_bool_complex_and_float16(cluster):
    assert all(cluster.run(bool_and_complex_and_float16))


def test_bfloat16(cluster):
    pytest.importorskip("ml_dtypes")
    assert all(cluster.run(bfloat16_via_ml_dtypes_or_storage))


def test_float8(cluster):
    pytest.importorskip("ml_dtypes")
    assert all(cluster.run(float8_cases))


def test_scan_and_exscan(cluster):
    assert all(cluster.run(scan_cases))


def test_async_work_completes_in_issue_order(cluster):
    assert all(cluster.run(async_in_issue_order))


def test_barrier(cluster):
    assert all(cluster.run(barrier_case))


def test_eight_ranks_every_collective(cluster8):
    assert all(cluster8.run(all_reduce_case, "sum", np.float32, 1001))
    assert all(cluster8.run(broadcast_case, 5, 17))
    assert all(cluster8.run(all_gather_cases, 3))
    assert all(cluster8.run(reduce_scatter_cases, 2))
    assert all(cluster8.run(gather_scatter_cases, 7))
    assert all(cluster8.run(all_to_all_cases))
    assert all(cluster8.run(scan_cases))
    assert all(cluster8.run(reduce_case, "max", np.int32, 9, 3))

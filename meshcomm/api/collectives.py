"""Collectives with torch.distributed's names, arguments and in-place semantics.

Each function validates everything it can see locally (types, dtypes, list
lengths, sizes, roots, membership) before any byte moves, then describes the
collective as a Problem and hands it to the group.
"""

from __future__ import annotations

import numpy as np

from meshcomm.algorithms.problem import problem_of
from meshcomm.api import ops as _ops
from meshcomm.api.fronts import fronted
from meshcomm.api.state import group_peer, lanes_of, resolve_group
from meshcomm.api.tensors import Buffer, as_buffer, same_dtype, tensor_array
from meshcomm.executor import narrow_floats
from meshcomm.executor.reduce_ops import combiner
from meshcomm.group.call import Call


_OP = _ops.ReduceOp.RedOpType
_COMBINES: dict[tuple, object] = {}  # (op name, storage dtype, logical dtype) -> combine, for pairs that passed


def _reduction(op, buffer: Buffer, group_size: int):
    """(op name, combine, finishing scale) for `op` on `buffer`, checked before data moves."""
    op = _ops.resolve(op)
    name = op.name
    key = (name, buffer.flat.dtype, buffer.logical)
    combine = _COMBINES.get(key)
    if combine is None:
        combine = combiner(name, buffer.flat.dtype, buffer.logical)
        if name == "avg":
            if buffer.flat.dtype.kind not in "fc" and buffer.logical is None:
                raise TypeError(f"ReduceOp.AVG needs a floating or complex dtype, got {buffer.dtype_name}")
        elif name == "premul_sum":
            if buffer.flat.dtype.kind not in "fc" and buffer.logical is None:
                raise TypeError(f"premul_sum needs a floating or complex dtype, got {buffer.dtype_name}")
        _COMBINES[key] = combine
    if name == "avg":
        return name, combine, 1.0 / group_size
    if name == "premul_sum":
        return name, combine, op.factor
    return name, combine, None


def _scale(flat: np.ndarray, logical: str | None, factor: float | None) -> None:
    if factor is None or flat.size == 0:
        return
    if logical is not None:
        widen, narrow = narrow_floats.converter(logical)
        flat[...] = narrow(widen(flat) * np.float32(factor))
    else:
        flat *= flat.dtype.type(factor) if flat.dtype.kind == "c" else factor


def _then(*steps):
    def run() -> None:
        for step in steps:
            if step is not None:
                step()

    return run


def _finishing(buf: Buffer, factor: float | None = None):
    """What completes a call writing into `buf`: the reduction's scaling, the copy back; None when nothing does."""
    if factor is None:
        return None if buf.writeback is None else buf.finish
    return _then(lambda: _scale(buf.flat, buf.logical, factor), buf.finish)


def _on_lane(group, key: tuple, input, output) -> bool:
    """Whether the group's lane for `key` ran the call (False: the face runs it, checks and all). A face builds a
    key (group/lanes.py) for a blocking call on numpy arrays or CPU torch tensors (tensors.tensor_array) with the
    group's own algorithm and timeout, from everything else its checks look at."""
    try:
        lane = lanes_of(group).get(key)
    except TypeError:  # an argument that cannot be a key: the face's own checks name it
        return False
    return lane is not None and lane.run(input, output)


def all_reduce_lane_key(op) -> tuple:
    """The head of all_reduce's lane key for `op`; the array's dtype and shape complete it. For a caller that
    hands arrays to the lanes itself (native/group_calls.c, through the torch backend); all_reduce writes the
    same head inline, and the torch backend's lane test fails if the two differ."""
    return ("all_reduce", op)


# What a root argument may be for a call to be keyed for a lane (1.0 == 1, but only an int is a rank), and a list
# of blocks: the lane reads a list's items itself (native/blocks.c).
_ROOT_TYPES = (int, type(None))
_LIST_TYPES = (list, tuple, type(None))


def _arrays_of(tensors):
    """A list of torch tensors as the numpy arrays a lane takes (tensor_array), or it as it is when one is not."""
    if not tensors:
        return tensors
    arrays = [tensor_array(tensor) for tensor in tensors]
    return tensors if any(array is None for array in arrays) else arrays


def _check_list(values, name: str, length: int) -> list:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list, got {type(values).__name__}")
    if len(values) != length:
        raise ValueError(f"{name} must have one entry per rank of the group ({length}), got {len(values)}")
    return list(values)


@fronted(("src", "group_src", "tensor.dtype", "tensor.shape"), ("tensor", "tensor"), tensor="array", src="root",
         group_src="root")
def broadcast(tensor, src=None, group=None, async_op=False, group_src=None, *, algorithm=None, timeout=None):
    """Copy `tensor` from rank `src` into `tensor` on every rank of the group."""
    key = None
    if (not async_op and algorithm is None and timeout is None
            and type(src if group_src is None else group_src) is int  # 1.0 == 1, but only an int is a rank
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("broadcast", src, group_src, array.dtype, array.shape)
        if _on_lane(group, key, array, array):
            return None
    g = resolve_group(group, op="broadcast")
    if g is None:
        return None
    root = group_peer(g, src, group_src, "src")
    buf = as_buffer(tensor, "tensor", writable=True)
    problem = problem_of("broadcast", g.size, (buf.count,), root)
    buffers = {"input": buf.flat, "output": buf.flat}
    call = Call(problem, buffers, buf.dtype_name, "none", None, algorithm, _finishing(buf), timeout, key)
    return g.collective(call, async_op)


@fronted(("op", "tensor.dtype", "tensor.shape"), ("tensor", "tensor"), tensor="array", op="op")
def all_reduce(tensor, op=_ops.ReduceOp.SUM, group=None, async_op=False, *, algorithm=None, timeout=None):
    """Reduce `tensor` across the group; every rank gets the result in place."""
    key = None
    if (type(op) is _OP and not async_op and algorithm is None and timeout is None
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("all_reduce", op, array.dtype, array.shape)  # all_reduce_lane_key(op) + ..., inline on the hot path
        if _on_lane(group, key, array, array):
            return None
    g = resolve_group(group, op="all_reduce")
    if g is None:
        return None
    buf = as_buffer(tensor, "tensor", writable=True)
    name, combine, factor = _reduction(op, buf, g.size)
    problem = problem_of("all_reduce", g.size, (buf.count,))
    finish = _finishing(buf, factor)
    buffers = {"input": buf.flat, "output": buf.flat}
    call = Call(problem, buffers, buf.dtype_name, name, combine, algorithm, finish, timeout, key)
    return g.collective(call, async_op)


@fronted(("op", "dst", "group_dst", "tensor.dtype", "tensor.shape"), ("tensor", "tensor"), tensor="array", op="op",
         dst="root", group_dst="root")
def reduce(tensor, dst=None, op=_ops.ReduceOp.SUM, group=None, async_op=False, group_dst=None, *,
           algorithm=None, timeout=None):
    """Reduce `tensor` across the group into `tensor` on rank `dst`; other ranks' tensors are unchanged."""
    key = None
    if (type(op) is _OP and not async_op and algorithm is None and timeout is None
            and type(dst if group_dst is None else group_dst) is int  # 1.0 == 1, but only an int is a rank
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("reduce", op, dst, group_dst, array.dtype, array.shape)
        if _on_lane(group, key, array, array):  # a lane of a rank other than dst leaves `tensor` as it is
            return None
    g = resolve_group(group, op="reduce")
    if g is None:
        return None
    root = group_peer(g, dst, group_dst, "dst")
    is_root = g.rank == root
    buf = as_buffer(tensor, "tensor", writable=is_root)
    name, combine, factor = _reduction(op, buf, g.size)
    problem = problem_of("reduce", g.size, (buf.count,), root)
    output = buf.flat if is_root else np.empty_like(buf.flat)
    finish = _finishing(buf, factor) if is_root else None
    buffers = {"input": buf.flat, "output": output}
    return g.collective(Call(problem, buffers, buf.dtype_name, name, combine, algorithm, finish, timeout, key), async_op)


@fronted(("tensor.dtype", "tensor.shape"), ("tensor", "tensor_list"), tensor="array", tensor_list="list")
def all_gather(tensor_list, tensor, group=None, async_op=False, *, algorithm=None, timeout=None):
    """tensor_list[r] receives rank r's `tensor`, on every rank."""
    key = None
    if (not async_op and algorithm is None and timeout is None and type(tensor_list) in _LIST_TYPES
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("all_gather", array.dtype, array.shape)
        if _on_lane(group, key, array, tensor_list if array is tensor else _arrays_of(tensor_list)):
            return None
    return _all_gather(tensor_list, tensor, group, async_op, algorithm, timeout, key)


def _all_gather(tensor_list, tensor, group, async_op, algorithm, timeout, key):
    """all_gather's whole path, apart from the lane's: its closure's cells would cost every laned call."""
    g = resolve_group(group, op="all_gather")
    if g is None:
        return None
    outs = [as_buffer(t, f"tensor_list[{i}]", writable=True) for i, t in enumerate(_check_list(tensor_list, "tensor_list", g.size))]
    buf = as_buffer(tensor, "tensor")
    for i, out in enumerate(outs):
        same_dtype(out, buf, f"all_gather tensor_list[{i}] and tensor")
    counts = tuple(out.count for out in outs)
    if counts[g.rank] != buf.count:
        raise ValueError(
            f"tensor has {buf.count} elements but tensor_list[{g.rank}] (this rank's slot) has {counts[g.rank]}"
        )
    problem = problem_of("all_gather", g.size, counts)
    output = np.empty(sum(counts), dtype=buf.flat.dtype)
    offsets = problem.offsets()

    def finish() -> None:
        for r, out in enumerate(outs):
            out.flat[...] = output[offsets[r] : offsets[r + 1]]
            out.finish()

    buffers = {"input": buf.flat, "output": output}
    return g.collective(Call(problem, buffers, buf.dtype_name, "none", None, algorithm, finish, timeout, key), async_op)


@fronted(("output_tensor.dtype", "output_tensor.shape", "input_tensor.dtype", "input_tensor.shape"),
         ("input_tensor", "output_tensor"), output_tensor="array", input_tensor="array")
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, *, algorithm=None, timeout=None):
    """output_tensor holds every rank's input_tensor concatenated in rank order."""
    key = None
    if (not async_op and algorithm is None and timeout is None
            and (out := output_tensor if type(output_tensor) is np.ndarray else tensor_array(output_tensor)) is not None
            and (inp := input_tensor if type(input_tensor) is np.ndarray else tensor_array(input_tensor)) is not None):
        key = ("all_gather_into_tensor", out.dtype, out.shape, inp.dtype, inp.shape)
        if _on_lane(group, key, inp, out):
            return None
    g = resolve_group(group, op="all_gather_into_tensor")
    if g is None:
        return None
    out = as_buffer(output_tensor, "output_tensor", writable=True)
    buf = as_buffer(input_tensor, "input_tensor")
    same_dtype(out, buf, "all_gather_into_tensor output_tensor and input_tensor")
    if out.count != g.size * buf.count:
        raise ValueError(
            f"output_tensor must have group size x input_tensor elements ({g.size} x {buf.count} = "
            f"{g.size * buf.count}), got {out.count}"
        )
    problem = problem_of("all_gather", g.size, (buf.count,) * g.size)
    buffers = {"input": buf.flat, "output": out.flat}
    call = Call(problem, buffers, buf.dtype_name, "none", None, algorithm, _finishing(out), timeout, key)
    return g.collective(call, async_op)


@fronted(("op", "output.dtype", "output.shape"), ("input_list", "output"), output="array", input_list="list", op="op")
def reduce_scatter(output, input_list, op=_ops.ReduceOp.SUM, group=None, async_op=False, *,
                   algorithm=None, timeout=None):
    """Reduce input_list[r] across the group into rank r's `output`."""
    key = None
    if (type(op) is _OP and not async_op and algorithm is None and timeout is None
            and type(input_list) in _LIST_TYPES
            and (array := output if type(output) is np.ndarray else tensor_array(output)) is not None):
        key = ("reduce_scatter", op, array.dtype, array.shape)
        if _on_lane(group, key, input_list if array is output else _arrays_of(input_list), array):
            return None
    g = resolve_group(group, op="reduce_scatter")
    if g is None:
        return None
    out = as_buffer(output, "output", writable=True)
    ins = [as_buffer(t, f"input_list[{i}]") for i, t in enumerate(_check_list(input_list, "input_list", g.size))]
    for i, item in enumerate(ins):
        same_dtype(item, out, f"reduce_scatter input_list[{i}] and output")
    counts = tuple(item.count for item in ins)
    if counts[g.rank] != out.count:
        raise ValueError(f"output has {out.count} elements but input_list[{g.rank}] has {counts[g.rank]}")
    name, combine, factor = _reduction(op, out, g.size)
    problem = problem_of("reduce_scatter", g.size, counts)
    joined = np.concatenate([item.flat for item in ins]) if ins else np.empty(0, out.flat.dtype)
    finish = _finishing(out, factor)
    buffers = {"input": joined, "output": out.flat}
    call = Call(problem, buffers, out.dtype_name, name, combine, algorithm, finish, timeout, key)
    return g.collective(call, async_op)


@fronted(("op", "output.dtype", "output.shape", "input.dtype", "input.shape"), ("input", "output"), output="array",
         input="array", op="op")
def reduce_scatter_tensor(output, input, op=_ops.ReduceOp.SUM, group=None, async_op=False, *,
                          algorithm=None, timeout=None):
    """Reduce `input` across the group; rank r keeps block r (of output's size) in `output`."""
    key = None
    if (type(op) is _OP and not async_op and algorithm is None and timeout is None
            and (out := output if type(output) is np.ndarray else tensor_array(output)) is not None
            and (inp := input if type(input) is np.ndarray else tensor_array(input)) is not None):
        key = ("reduce_scatter_tensor", op, out.dtype, out.shape, inp.dtype, inp.shape)
        if _on_lane(group, key, inp, out):
            return None
    g = resolve_group(group, op="reduce_scatter_tensor")
    if g is None:
        return None
    out = as_buffer(output, "output", writable=True)
    buf = as_buffer(input, "input")
    same_dtype(out, buf, "reduce_scatter_tensor output and input")
    if buf.count != g.size * out.count:
        raise ValueError(
            f"input must have group size x output elements ({g.size} x {out.count} = {g.size * out.count}), "
            f"got {buf.count}"
        )
    name, combine, factor = _reduction(op, out, g.size)
    problem = problem_of("reduce_scatter", g.size, (out.count,) * g.size)
    finish = _finishing(out, factor)
    buffers = {"input": buf.flat, "output": out.flat}
    call = Call(problem, buffers, out.dtype_name, name, combine, algorithm, finish, timeout, key)
    return g.collective(call, async_op)


@fronted(("dst", "group_dst", "tensor.dtype", "tensor.shape", "not gather_list"), ("tensor", "gather_list"),
         tensor="array", gather_list="list", dst="root", group_dst="root")
def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None, *,
           algorithm=None, timeout=None):
    """gather_list[r] on rank `dst` receives rank r's `tensor`."""
    key = None
    if (not async_op and algorithm is None and timeout is None and type(dst) in _ROOT_TYPES
            and type(group_dst) in _ROOT_TYPES and type(gather_list) in _LIST_TYPES
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("gather", dst, group_dst, array.dtype, array.shape, not gather_list)
        if _on_lane(group, key, array, gather_list if array is tensor else _arrays_of(gather_list)):
            return None
    return _gather(tensor, gather_list, dst, group, async_op, group_dst, algorithm, timeout, key)


def _gather(tensor, gather_list, dst, group, async_op, group_dst, algorithm, timeout, key):
    """gather's whole path, apart from the lane's: its closure's cells would cost every laned call."""
    g = resolve_group(group, op="gather")
    if g is None:
        return None
    root = group_peer(g, 0 if dst is None and group_dst is None else dst, group_dst, "dst")
    buf = as_buffer(tensor, "tensor")
    counts = (buf.count,) * g.size
    problem = problem_of("gather", g.size, counts, root)
    if g.rank == root:
        outs = [as_buffer(t, f"gather_list[{i}]", writable=True)
                for i, t in enumerate(_check_list(gather_list, "gather_list", g.size))]
        for i, out in enumerate(outs):
            same_dtype(out, buf, f"gather gather_list[{i}] and tensor")
            if out.count != buf.count:
                raise ValueError(f"gather_list[{i}] must have {buf.count} elements like tensor, got {out.count}")
        span = _one_span(outs, buf.flat.dtype)
        output = span if span is not None else np.empty(problem.total, dtype=buf.flat.dtype)

        def finish() -> None:  # it also holds the blocks a span writes into until the call is done
            for r, out in enumerate(outs):
                if span is None:
                    out.flat[...] = output[r * buf.count : (r + 1) * buf.count]
                out.finish()
    else:
        if gather_list:
            raise ValueError(f"gather_list must be given on the destination rank only (dst={g.ranks[root]})")
        output, finish = np.empty(0, dtype=buf.flat.dtype), None
    buffers = {"input": buf.flat, "output": output}
    return g.collective(Call(problem, buffers, buf.dtype_name, "none", None, algorithm, finish, timeout, key), async_op)


@fronted(("src", "group_src", "tensor.dtype", "tensor.shape", "not scatter_list"), ("scatter_list", "tensor"),
         tensor="array", scatter_list="list", src="root", group_src="root")
def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None, *,
            algorithm=None, timeout=None):
    """Rank r's `tensor` receives scatter_list[r] from rank `src`."""
    key = None
    if (not async_op and algorithm is None and timeout is None and type(src) in _ROOT_TYPES
            and type(group_src) in _ROOT_TYPES and type(scatter_list) in _LIST_TYPES
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("scatter", src, group_src, array.dtype, array.shape, not scatter_list)
        if _on_lane(group, key, scatter_list if array is tensor else _arrays_of(scatter_list), array):
            return None
    g = resolve_group(group, op="scatter")
    if g is None:
        return None
    root = group_peer(g, 0 if src is None and group_src is None else src, group_src, "src")
    out = as_buffer(tensor, "tensor", writable=True)
    problem = problem_of("scatter", g.size, (out.count,) * g.size, root)
    if g.rank == root:
        ins = [as_buffer(t, f"scatter_list[{i}]") for i, t in enumerate(_check_list(scatter_list, "scatter_list", g.size))]
        for i, item in enumerate(ins):
            same_dtype(item, out, f"scatter scatter_list[{i}] and tensor")
            if item.count != out.count:
                raise ValueError(f"scatter_list[{i}] must have {out.count} elements like tensor, got {item.count}")
        span = _one_span(ins, out.flat.dtype)
        joined = span if span is not None else np.concatenate([item.flat for item in ins])
        finish = _finishing(out) if span is None else _holding(ins, out)
    else:
        if scatter_list:
            raise ValueError(f"scatter_list must be given on the source rank only (src={g.ranks[root]})")
        joined, finish = np.empty(0, dtype=out.flat.dtype), _finishing(out)
    buffers = {"input": joined, "output": out.flat}
    return g.collective(Call(problem, buffers, out.dtype_name, "none", None, algorithm, finish, timeout, key), async_op)


# Blocks of at least this many bytes in all are looked at for lying one after another (_one_span): asking each
# for its address costs more than copying a small block.
_SPAN_FROM_BYTES = 256 << 10


def _holding(blocks: list[Buffer], out: Buffer):
    """What completes a scatter whose root reads its blocks where they are: `out`'s copy back, and the blocks
    held until then (an async call's caller may drop them)."""

    def finish() -> None:
        out.finish()

    finish.holds = blocks  # type: ignore[attr-defined]
    return finish


def _one_span(blocks: list[Buffer], dtype: np.dtype) -> np.ndarray | None:
    """The blocks' memory as one flat array of `dtype` when they lie one after another, as the chunks of one
    tensor do: a gather writes straight into them and a scatter reads them where they are. None when they do
    not, when one holds another dtype (the same name in another byte order) or is a copy (written back later),
    or when they are too small to be worth asking."""
    first = blocks[0].flat
    if (sum(block.flat.nbytes for block in blocks) < _SPAN_FROM_BYTES
            or any(b.writeback or b.flat.dtype != dtype for b in blocks)):
        return None
    start = end = first.__array_interface__["data"][0]
    for block in blocks:
        if block.flat.__array_interface__["data"][0] != end:
            return None
        end += block.flat.nbytes
    # Every byte of the span is one of the blocks' (they are alive for the call), so the view reads and writes
    # nothing else.
    return np.lib.stride_tricks.as_strided(first, shape=((end - start) // first.itemsize,),
                                           strides=(first.itemsize,), writeable=first.flags.writeable)


def _splits(sizes, name: str, total: int, size: int, row: int) -> list[int]:
    """Element counts per rank from torch's split sizes (counted in rows of dim 0)."""
    if sizes is None or len(sizes) == 0:
        if total % size:
            raise ValueError(f"{name} not given and {total} rows do not split evenly across {size} ranks")
        return [total // size * row] * size
    sizes = [int(s) for s in sizes]
    if len(sizes) != size:
        raise ValueError(f"{name} must have one entry per rank ({size}), got {len(sizes)}")
    if any(s < 0 for s in sizes):
        raise ValueError(f"{name} must be >= 0, got {sizes}")
    if sum(sizes) != total:
        raise ValueError(f"{name} must add up to the tensor's first dimension ({total}), got {sizes} = {sum(sizes)}")
    return [s * row for s in sizes]


def _rows(buffer: Buffer, shape) -> tuple[int, int]:
    """(length of dim 0, elements per row) for a tensor of `shape`."""
    if len(shape) == 0:
        return buffer.count, 1
    rows = shape[0]
    return rows, (buffer.count // rows if rows else int(np.prod(shape[1:], dtype=np.int64)))


@fronted(("output.dtype", "output.shape", "input.dtype", "input.shape"), ("input", "output"), output="array",
         input="array", output_split_sizes="none", input_split_sizes="none")
def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False, *, algorithm=None, timeout=None):
    """Split `input` along dim 0 by input_split_sizes, send piece j to rank j; output collects the pieces."""
    uniform = input_split_sizes is None and output_split_sizes is None
    key = None
    if (uniform and not async_op and algorithm is None and timeout is None
            and (out := output if type(output) is np.ndarray else tensor_array(output)) is not None
            and (inp := input if type(input) is np.ndarray else tensor_array(input)) is not None):
        key = ("all_to_all_single", out.dtype, out.shape, inp.dtype, inp.shape)
        if _on_lane(group, key, inp, out):
            return None
    g = resolve_group(group, op="all_to_all_single")
    if g is None:
        return None
    out = as_buffer(output, "output", writable=True)
    buf = as_buffer(input, "input")
    same_dtype(out, buf, "all_to_all_single output and input")
    in_rows, in_row = _rows(buf, tuple(input.shape))
    out_rows, out_row = _rows(out, tuple(output.shape))
    send = _splits(input_split_sizes, "input_split_sizes", in_rows, g.size, in_row)
    recv = _splits(output_split_sizes, "output_split_sizes", out_rows, g.size, out_row)
    return _all_to_all(g, buf, out.flat, send, recv, _finishing(out), algorithm, async_op, timeout, uniform, key)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False, *, algorithm=None, timeout=None):
    """output_tensor_list[j] receives rank j's input_tensor_list[this rank]."""
    g = resolve_group(group, op="all_to_all")
    if g is None:
        return None
    outs = [as_buffer(t, f"output_tensor_list[{i}]", writable=True)
            for i, t in enumerate(_check_list(output_tensor_list, "output_tensor_list", g.size))]
    ins = [as_buffer(t, f"input_tensor_list[{i}]")
           for i, t in enumerate(_check_list(input_tensor_list, "input_tensor_list", g.size))]
    for i, item in enumerate(ins + outs):
        same_dtype(item, ins[0], "all_to_all tensors")
    joined = np.concatenate([item.flat for item in ins])
    recv = [out.count for out in outs]
    output = np.empty(sum(recv), dtype=joined.dtype)

    def finish() -> None:
        offset = 0
        for out in outs:
            out.flat[...] = output[offset : offset + out.count]
            out.finish()
            offset += out.count

    holder = Buffer(joined, ins[0].dtype_name, ins[0].logical, None)
    return _all_to_all(g, holder, output, [item.count for item in ins], recv, finish, algorithm, async_op,
                       timeout, uniform=False)


def _all_to_all(g, buf: Buffer, output: np.ndarray, send: list[int], recv: list[int], finish, algorithm,
                async_op, timeout, uniform: bool, lane_key: tuple | None = None):
    if uniform:
        counts = (send[0],) * (g.size * g.size)
        if recv != send:
            raise ValueError(f"output has {sum(recv)} elements but input has {sum(send)}; even splits need equal sizes")
    else:
        counts = _exchange_matrix(g, send, recv, timeout)
    problem = problem_of("all_to_all", g.size, counts)
    buffers = {"input": buf.flat, "output": output}
    return g.collective(Call(problem, buffers, buf.dtype_name, "none", None, algorithm, finish, timeout, lane_key),
                        async_op)


def _exchange_matrix(g, send: list[int], recv: list[int], timeout) -> tuple:
    """Every rank learns the whole send matrix, and uneven splits are checked against each other."""
    mine = np.asarray(send, dtype=np.int64)
    matrix = np.empty(g.size * g.size, dtype=np.int64)
    problem = problem_of("all_gather", g.size, (g.size,) * g.size)
    g.collective(Call(problem, {"input": mine, "output": matrix}, "int64", "none", None, None, None, timeout))
    table = matrix.reshape(g.size, g.size)
    column = table[:, g.rank].tolist()
    if column != list(recv):
        raise ValueError(
            f"output_split_sizes on rank {g.ranks[g.rank]} expect {recv} elements from ranks {list(g.ranks)}, "
            f"but they send {column}"
        )
    return tuple(int(x) for x in matrix)


def barrier(group=None, async_op=False, device_ids=None, *, algorithm=None, timeout=None):
    """Return once every rank of the group has entered the barrier."""
    g = resolve_group(group, op="barrier")
    if g is None:
        return None
    problem = problem_of("barrier", g.size, ())
    return g.collective(Call(problem, {}, "uint8", "none", None, algorithm, None, timeout), async_op)


def _prefix(name: str, tensor, op, group, async_op, algorithm, timeout):
    g = resolve_group(group, op=name)
    if g is None:
        return None
    buf = as_buffer(tensor, "tensor", writable=True)
    op_name, combine, factor = _reduction(op, buf, g.size)
    if op_name == "avg":
        raise TypeError(f"ReduceOp.AVG is not defined for {name}")
    problem = problem_of(name, g.size, (buf.count,))
    finish = _finishing(buf, factor)
    buffers = {"input": buf.flat, "output": buf.flat}
    return g.collective(Call(problem, buffers, buf.dtype_name, op_name, combine, algorithm, finish, timeout), async_op)


def scan(tensor, op=_ops.ReduceOp.SUM, group=None, async_op=False, *, algorithm=None, timeout=None):
    """Inclusive prefix reduction in place: rank r gets op over ranks 0..r (MPI_Scan)."""
    return _prefix("scan", tensor, op, group, async_op, algorithm, timeout)


def exscan(tensor, op=_ops.ReduceOp.SUM, group=None, async_op=False, *, algorithm=None, timeout=None):
    """Exclusive prefix reduction in place: rank r gets op over ranks 0..r-1; rank 0's tensor is unchanged."""
    return _prefix("exscan", tensor, op, group, async_op, algorithm, timeout)

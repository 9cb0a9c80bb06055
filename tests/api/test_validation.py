"""Bad arguments raise ValueError/TypeError naming the argument, before any byte moves."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import meshcomm as dist


def _message(fn, *args, **kwargs) -> str:
    try:
        fn(*args, **kwargs)
    except (ValueError, TypeError, KeyError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def bad_calls() -> dict:
    rank, size = dist.get_rank(), dist.get_world_size()
    f32 = np.zeros(4, np.float32)
    results = {
        "root outside": _message(dist.broadcast, f32, src=size + 3),
        "group root outside": _message(dist.broadcast, f32, group_src=size),
        "not a tensor": _message(dist.all_reduce, [1, 2, 3]),
        "bitwise on float": _message(dist.all_reduce, f32, op=dist.ReduceOp.BAND),
        "avg on int": _message(dist.all_reduce, np.zeros(2, np.int32), op=dist.ReduceOp.AVG),
        "bad op": _message(dist.all_reduce, f32, op="median"),
        "list length": _message(dist.all_gather, [f32] * (size + 1), f32),
        "dtype mismatch": _message(dist.all_gather_into_tensor, np.zeros(4 * size, np.float64), f32),
        "byte order mismatch": _message(dist.reduce_scatter, f32, [np.zeros(4, f32.dtype.newbyteorder())] * size),
        "output too small": _message(dist.all_gather_into_tensor, np.zeros(4 * size - 1, np.float32), f32),
        "reduce_scatter input size": _message(dist.reduce_scatter_tensor, f32, np.zeros(4 * size + 1, np.float32)),
        "splits do not add up": _message(dist.all_to_all_single, np.zeros(size), np.zeros(size),
                                         input_split_sizes=[1] * (size + 1)),
        "read-only output": _message(dist.all_reduce, np.frombuffer(b"\0" * 16, dtype=np.float32)),
        "tag type": _message(dist.send, f32, 0, tag="x"),
        "dst not in group": _message(dist.send, f32, size + 1),
        "new_group duplicate": _message(dist.new_group, [0, 0]),
        "new_group outside": _message(dist.new_group, [size]),
        "mesh shape": _message(dist.init_device_mesh, "cpu", (size + 1,)),
        "object dtype": _message(dist.all_reduce, np.array(["a"], dtype=object)),
        "timeout": _message(dist.new_group, [0], timeout=-1),
        "scatter list on non-root": _message(dist.scatter, f32, [f32] * size, src=0) if rank != 0 else "skip",
        "gather list wrong length": _message(dist.gather, f32, [f32], dst=rank) if size > 1 else "skip",
        "agree flag": _message(dist.agree, "yes"),
        "revoke reason": _message(dist.revoke, reason=3),
        "shrink timeout": _message(dist.shrink, timeout=0),
    }
    # Nothing moved, nothing is stuck: the world still works.
    x = np.ones(3)
    dist.all_reduce(x)
    results["afterwards"] = float(x[0])
    return results


_OTHER_ORDER = {"little": "big", "big": "little"}[sys.byteorder]
EXPECTED = {
    "root outside": ("ValueError", "src must be a rank of group"),
    "group root outside": ("ValueError", "group_src must be in [0,"),
    "not a tensor": ("TypeError", "tensor must be a numpy.ndarray or torch.Tensor, got list"),
    "bitwise on float": ("TypeError", "band is not defined for dtype float32"),
    "avg on int": ("TypeError", "AVG needs a floating or complex dtype, got int32"),
    "bad op": ("TypeError", "op must be a ReduceOp"),
    "list length": ("ValueError", "tensor_list must have one entry per rank"),
    "dtype mismatch": ("TypeError", "dtypes differ, float64 and float32"),
    "byte order mismatch": ("TypeError", f"input_list[0] and output: byte orders differ, {_OTHER_ORDER}-endian and "
                                         f"{sys.byteorder}-endian float32"),
    "output too small": ("ValueError", "output_tensor must have group size x input_tensor elements"),
    "reduce_scatter input size": ("ValueError", "input must have group size x output elements"),
    "splits do not add up": ("ValueError", "input_split_sizes must have one entry per rank"),
    "read-only output": ("ValueError", "tensor is read-only"),
    "tag type": ("TypeError", "tag must be an int, got str"),
    "dst not in group": ("ValueError", "dst must be a rank of group"),
    "new_group duplicate": ("ValueError", "ranks must not repeat a rank"),
    "new_group outside": ("ValueError", "ranks must be global ranks in [0,"),
    "mesh shape": ("ValueError", "must multiply to the world size"),
    "object dtype": ("TypeError", "has dtype object, which meshcomm cannot send"),
    "timeout": ("ValueError", "timeout must be a positive number"),
    "scatter list on non-root": ("ValueError", "scatter_list must be given on the source rank only"),
    "gather list wrong length": ("ValueError", "gather_list must have one entry per rank"),
    "agree flag": ("TypeError", "flag must be a bool, got str"),
    "revoke reason": ("TypeError", "reason must be a str, got int"),
    "shrink timeout": ("ValueError", "timeout must be a positive number"),
}


def test_every_bad_argument_names_the_rule_and_leaves_the_group_usable(cluster):
    for rank, results in enumerate(cluster.run(bad_calls)):
        assert results.pop("afterwards") == cluster.size
        for case, message in results.items():
            if message == "skip":
                continue
            kind, words = EXPECTED[case]
            assert message.startswith(kind) and words in message, (rank, case, message)


def test_calls_before_init_say_so():
    with pytest.raises(RuntimeError, match="not initialized"):
        dist.all_reduce(np.zeros(1))
    assert not dist.is_initialized()


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend must be one of"):
        dist.init_process_group("carrier-pigeon", rank=0, world_size=1)


def test_abort_reason_must_be_text():
    with pytest.raises(TypeError, match="reason must be a str"):
        dist.abort(7)

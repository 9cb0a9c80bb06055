"""MeshcommProcessGroup: torch's ProcessGroup interface, each method translated into meshcomm collectives."""

from __future__ import annotations

import datetime
import weakref
from typing import Any, Callable

import torch
import torch.distributed as dist

from meshcomm import native
from meshcomm.api import collectives as coll
from meshcomm.api import p2p
from meshcomm.api.ops import ReduceOp, _Op
from meshcomm.api.tensors import numpy_viewed_dtypes
from meshcomm.group.group import Group
from meshcomm.torch_backend import work as works
from meshcomm.torch_backend.work import TorchWork
from meshcomm.torch_backend.plugin import BACKEND_NAME

# A launch takes (async_op, timeout) and returns meshcomm's Work (None when it ran synchronously).
Launch = Callable[[bool, "float | None"], Any]


def reduce_op(op: Any) -> _Op:
    """meshcomm's op for torch's ReduceOp (as found in an options record) or RedOpType."""
    if op == _TORCH_SUM:  # nearly every call's op, and pybind's comparison is the cheapest question to ask
        return ReduceOp.SUM
    kind = getattr(op, "op", op)
    code = getattr(kind, "value", None)
    known = _KNOWN.get(code) if type(code) is int else None
    if known is not None:  # every call asks, and a pybind enum's name costs a microsecond
        return known
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or name.lower() not in _OPS:
        raise TypeError(f"reduceOp must be a torch.distributed.ReduceOp, got {op!r}")
    if name == "PREMUL_SUM":
        factor = getattr(op, "factor", None)
        if factor is None:
            raise ValueError("reduceOp PREMUL_SUM needs a factor (use dist._make_nccl_premul_sum(factor))")
        return ReduceOp.premul_sum(float(factor))
    if type(code) is int:
        _KNOWN[code] = _OPS[name.lower()]
    return _OPS[name.lower()]


_TORCH_SUM = dist.ReduceOp.SUM
_OPS = {op.name: op for op in vars(ReduceOp).values() if isinstance(op, _Op)}
_KNOWN: dict[int, _Op] = {}  # torch's RedOpType's value -> meshcomm's op, for all but PREMUL_SUM (its factor varies)


def _seconds(timeout: Any) -> float | None:
    """Seconds from an options record's timeout; torch marks "not set" with a negative value."""
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
        return seconds if seconds > 0 else None
    return None


def _blocking_allreduce(group: Group, method: Callable[..., Any]) -> Callable[..., Any] | None:
    """The compiled allreduce (native/group_calls.c): a blocking SUM of one CPU tensor goes straight to the lane the
    API keeps for it, everything else to `method`. None without the compiled path."""
    if native.core is None:
        return None
    numpy_dtypes = {dtype: torch.empty(0, dtype=dtype).numpy().dtype for dtype in numpy_viewed_dtypes(torch)
                    if not dtype.is_complex}
    return native.core.BlockingAllreduce(group.lanes, coll.all_reduce_lane_key(ReduceOp.SUM), torch.Tensor,
                                         numpy_dtypes, torch.strided, _TORCH_SUM, datetime.timedelta(0),
                                         weakref.WeakMethod(method))


def _one(tensors: list, name: str) -> Any:
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"{name} must be a list of exactly one tensor (one device per process), got {got}")
    return tensors[0]


def _same_length(outputs: list, inputs: list, what: str) -> None:
    if len(outputs) != len(inputs):
        raise ValueError(f"{what}: output and input lists must have the same length, got {len(outputs)} and {len(inputs)}")


class MeshcommProcessGroup(dist.ProcessGroup):
    """One torch process group backed by one meshcomm Group.

    Every method starts meshcomm operations on the group's queue (so they
    complete in issue order) and returns a TorchWork; a call whose options
    say asyncOp=False (torch.distributed's blocking functions) runs on the
    calling thread instead, raises its errors right there, and returns None,
    which those functions take as already synchronized.
    """

    def __init__(self, group: Group, name: str, on_shutdown: Callable[[], None]) -> None:
        # The C++ base keeps rank and size; assigning self.rank/self.size would hide its methods.
        super().__init__(group.rank, group.size)
        self._group = group
        self._name = name
        self._desc = name
        self._on_shutdown = on_shutdown
        compiled = _blocking_allreduce(group, self.allreduce)
        if compiled is not None:  # torch looks allreduce up on the group: the step skips this method's frame as well
            self.allreduce = compiled

    @property
    def meshcomm_group(self) -> Group:
        """The meshcomm Group behind this process group: meshcomm's own functions accept it."""
        return self._group

    # ----- names (C++ asks for these; functional collectives, DTensor and FSDP read group_name)

    def getBackendName(self) -> str:
        return BACKEND_NAME

    def getGroupName(self) -> str:
        return self._name

    def setGroupName(self, name: str) -> None:
        self._name = name

    def getGroupDesc(self) -> str:
        return self._desc

    def setGroupDesc(self, desc: str) -> None:
        self._desc = desc

    def __repr__(self) -> str:
        return f"<MeshcommProcessGroup {self._name!r} ranks={list(self._group.ranks)}>"

    # ----- one place that runs launches synchronously or tracks them

    def _run(self, what: str, opts: Any, result: list[torch.Tensor], launches: list[Launch],
             after: Callable[[], None] | None = None) -> TorchWork | None:
        async_op = bool(getattr(opts, "asyncOp", True))
        timeout = getattr(opts, "timeout", None)
        timeout = _seconds(timeout) if timeout is not None else None
        if not async_op:
            for launch in launches:
                launch(False, timeout)
            if after is not None:
                after()
            return None  # torch's wrappers take None as "the backend has synchronized": nothing to wait on
        limit = self._group.timeout if timeout is None else timeout
        started = [launch(True, timeout) for launch in launches]
        return works.track(f"{what} on group {self._name!r}", started, result, limit, after)

    # ----- collectives reachable from C++ (DDP, _broadcast_coalesced, functional collectives)

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> TorchWork | None:
        tensor = _one(tensors, "tensors")
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        return self._run("allreduce", opts, list(tensors), [
            lambda a, t: coll.all_reduce(tensor, op, self._group, a, timeout=t)])

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> TorchWork | None:
        """Tensors of one dtype travel as one flat all_reduce (the point of coalescing); mixed dtypes one each."""
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        tensors = list(tensors)
        if not tensors or any(t.dtype != tensors[0].dtype for t in tensors):
            return self._run("allreduce_coalesced", opts, tensors, [
                (lambda a, t, x=x: coll.all_reduce(x, op, self._group, a, timeout=t)) for x in tensors])
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])

        def unflatten() -> None:
            offset = 0
            with torch.no_grad():
                for t in tensors:
                    t.copy_(flat[offset: offset + t.numel()].view_as(t))
                    offset += t.numel()

        return self._run("allreduce_coalesced", opts, tensors, [
            lambda a, t: coll.all_reduce(flat, op, self._group, a, timeout=t)], unflatten)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> TorchWork | None:
        root = int(getattr(opts, "rootRank", 0))
        return self._run("broadcast", opts, list(tensors), [
            (lambda a, t, x=x: coll.broadcast(x, None, self._group, a, group_src=root, timeout=t)) for x in tensors])

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> TorchWork | None:
        outputs = _one(output_tensors, "output_tensors")
        tensor = _one(input_tensors, "input_tensors")
        return self._run("allgather", opts, list(outputs), [
            lambda a, t: coll.all_gather(outputs, tensor, self._group, a, timeout=t)])

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork | None:
        return self._run("all_gather_single", opts, [output], [
            lambda a, t: coll.all_gather_into_tensor(output, input, self._group, a, timeout=t)])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: Any = None) -> TorchWork | None:
        _same_length(outputs, inputs, "all_gather_single_coalesced")
        return self._run("all_gather_single_coalesced", opts, list(outputs), [
            (lambda a, t, o=o, i=i: coll.all_gather_into_tensor(o, i, self._group, a, timeout=t))
            for o, i in zip(outputs, inputs)])

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]], input_list: list[torch.Tensor],
                            opts: Any = None) -> TorchWork | None:
        _same_length(output_lists, input_list, "allgather_coalesced")
        return self._run("allgather_coalesced", opts, [t for out in output_lists for t in out], [
            (lambda a, t, o=o, i=i: coll.all_gather(o, i, self._group, a, timeout=t))
            for o, i in zip(output_lists, input_list)])

    def reduce_scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                       opts: Any = None) -> TorchWork | None:
        output = _one(output_tensors, "output_tensors")
        inputs = _one(input_tensors, "input_tensors")
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        return self._run("reduce_scatter", opts, [output], [
            lambda a, t: coll.reduce_scatter(output, inputs, op, self._group, a, timeout=t)])

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> TorchWork | None:
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        return self._run("reduce_scatter_single", opts, [output], [
            lambda a, t: coll.reduce_scatter_tensor(output, input, op, self._group, a, timeout=t)])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> TorchWork | None:
        _same_length(outputs, inputs, "reduce_scatter_single_coalesced")
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        return self._run("reduce_scatter_single_coalesced", opts, list(outputs), [
            (lambda a, t, o=o, i=i: coll.reduce_scatter_tensor(o, i, op, self._group, a, timeout=t))
            for o, i in zip(outputs, inputs)])

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list[int],
                          input_split_sizes: list[int], opts: Any = None) -> TorchWork | None:
        out_splits = list(output_split_sizes) or None
        in_splits = list(input_split_sizes) or None
        return self._run("all_to_all_single", opts, [output], [
            lambda a, t: coll.all_to_all_single(output, input, out_splits, in_splits, self._group, a, timeout=t)])

    alltoall_base = all_to_all_single

    def barrier(self, opts: Any = None) -> TorchWork | None:
        return self._run("barrier", opts, [], [lambda a, t: coll.barrier(self._group, a, timeout=t)])

    # ----- collectives torch reaches from Python only

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> TorchWork | None:
        tensor = _one(tensors, "tensors")
        root = int(getattr(opts, "rootRank", 0))
        op = reduce_op(getattr(opts, "reduceOp", dist.ReduceOp.SUM))
        return self._run("reduce", opts, [tensor], [
            lambda a, t: coll.reduce(tensor, None, op, self._group, a, group_dst=root, timeout=t)])

    def gather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
               opts: Any = None) -> TorchWork | None:
        tensor = _one(input_tensors, "input_tensors")
        root = int(getattr(opts, "rootRank", 0))
        gather_list = _one(output_tensors, "output_tensors") if self._group.rank == root else None
        return self._run("gather", opts, list(gather_list or []), [
            lambda a, t: coll.gather(tensor, gather_list, None, self._group, a, group_dst=root, timeout=t)])

    def scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                opts: Any = None) -> TorchWork | None:
        tensor = _one(output_tensors, "output_tensors")
        root = int(getattr(opts, "rootRank", 0))
        scatter_list = _one(input_tensors, "input_tensors") if self._group.rank == root else None
        return self._run("scatter", opts, [tensor], [
            lambda a, t: coll.scatter(tensor, scatter_list, None, self._group, a, group_src=root, timeout=t)])

    def alltoall(self, output_tensors: list[torch.Tensor], input_tensors: list[torch.Tensor],
                 opts: Any = None) -> TorchWork | None:
        return self._run("alltoall", opts, list(output_tensors), [
            lambda a, t: coll.all_to_all(output_tensors, input_tensors, self._group, a, timeout=t)])

    # ----- point to point (peers are ranks of this group)

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> TorchWork:
        tensor = _one(tensors, "tensors")
        handle = p2p.isend(tensor, None, self._group, tag, group_dst=dst)
        return works.point_to_point(f"send to group rank {dst} (tag {tag})", handle, tensor, self._group.timeout)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> TorchWork:
        tensor = _one(tensors, "tensors")
        handle = p2p.irecv(tensor, None, self._group, tag, group_src=src)
        return works.point_to_point(f"recv from group rank {src} (tag {tag})", handle, tensor,
                                    self._group.timeout, self._group.group_rank)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> TorchWork:
        tensor = _one(tensors, "tensors")
        handle = p2p.irecv(tensor, None, self._group, tag)
        return works.point_to_point(f"recv from any rank (tag {tag})", handle, tensor,
                                    self._group.timeout, self._group.group_rank)

    # ----- lifetime

    def shutdown(self) -> None:
        """Called by torch's destroy_process_group: stop the group (and the runtime it owns)."""
        self._on_shutdown()

    def abort(self) -> None:
        """torch's abort: fail what is pending here and on the other ranks (meshcomm.abort), then stop."""
        self._group.runtime.abort(f"ProcessGroup.abort() on group {self._name!r}")
        self._on_shutdown()

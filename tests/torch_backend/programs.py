"""Per-rank programs the torch_backend tests run under both backends (they must be importable by spawned ranks)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def ints(rank: int, n: int, salt: int = 0) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) * 3 + rank * 5 + salt) % 7 + 1


def floats(rank: int, n: int, salt: float = 0.0) -> torch.Tensor:
    return torch.linspace(-1, 1, n, dtype=torch.float32) * (rank + 1) + salt


def _failure(call) -> list:
    """[exception type, message] of what call() raised, or ["no error", ...]."""
    try:
        value = call()
    except Exception as exc:  # the test inspects what was raised
        return [type(exc).__name__, str(exc)]
    return ["no error", repr(value)]


def every_call(rank: int, size: int) -> dict:
    """What each torch.distributed call produces on this rank, sync and async, world and sub-groups."""
    out: dict = {}
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        t = ints(rank, 9)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
        out[f"all_reduce_{name}"] = t.tolist()
    t = floats(rank, 1000)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out["all_reduce_async"] = t.tolist()
    out["all_reduce_async_future"] = work.get_future().value()[0].tolist()
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8):
        t = (torch.arange(6) % 4 + rank).to(dtype)
        dist.all_reduce(t)
        out[f"all_reduce_{dtype}"] = t.float().tolist()
    c = torch.complex(floats(rank, 4), floats(rank, 4, 1.0))
    dist.all_reduce(c)
    out["all_reduce_complex"] = torch.view_as_real(c).tolist()
    t = ints(rank, 6)
    dist.broadcast(t, src=size - 1)
    out["broadcast"] = t.tolist()
    t = ints(rank, 5)
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    if rank == 1:
        out["reduce"] = t.tolist()
    gathered = [torch.zeros(4, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(gathered, ints(rank, 4))
    out["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(size * 3)
    dist.all_gather_single(flat, floats(rank, 3), async_op=True).wait()
    out["all_gather_single"] = flat.tolist()
    rs = torch.zeros(2, dtype=torch.int64)
    dist.reduce_scatter_single(rs, ints(rank, 2 * size))
    out["reduce_scatter_single"] = rs.tolist()
    rs = torch.zeros(3, dtype=torch.int64)
    dist.reduce_scatter(rs, [ints(rank, 3, salt=r) for r in range(size)])
    out["reduce_scatter"] = rs.tolist()
    bucket = [torch.zeros(3, dtype=torch.int64) for _ in range(size)] if rank == 0 else None
    dist.gather(ints(rank, 3), bucket, dst=0)
    if rank == 0:
        out["gather"] = [b.tolist() for b in bucket]
    piece = torch.zeros(3, dtype=torch.int64)
    dist.scatter(piece, [ints(r, 3, salt=1) for r in range(size)] if rank == 0 else None, src=0)
    out["scatter"] = piece.tolist()
    a2a = torch.zeros(size * 2, dtype=torch.int64)
    dist.all_to_all_single(a2a, torch.arange(size * 2, dtype=torch.int64) + 100 * rank)
    out["all_to_all_single"] = a2a.tolist()
    send = [(rank + j) % 3 for j in range(size)]
    recv = [(q + rank) % 3 for q in range(size)]
    uneven = torch.zeros(sum(recv), 2, dtype=torch.int64)
    dist.all_to_all_single(uneven, torch.arange(2 * sum(send), dtype=torch.int64).reshape(-1, 2) + 10 * rank,
                           recv, send)
    out["all_to_all_single_uneven"] = uneven.tolist()
    outs = [torch.zeros(2, dtype=torch.int64) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((2,), 10 * rank + j, dtype=torch.int64) for j in range(size)])
    out["all_to_all"] = [o.tolist() for o in outs]
    dist.barrier()
    dist.barrier(async_op=True).wait()
    # point to point: a ring of send/recv, isend/irecv, a receive from any source, batch_isend_irecv
    right, left = (rank + 1) % size, (rank - 1) % size
    if rank % 2 == 0:
        dist.send(ints(rank, 4), right)
        got = torch.zeros(4, dtype=torch.int64)
        dist.recv(got, left)
    else:
        got = torch.zeros(4, dtype=torch.int64)
        dist.recv(got, left)
        dist.send(ints(rank, 4), right)
    out["send_recv"] = got.tolist()
    got = torch.zeros(4, dtype=torch.int64)
    works = [dist.isend(ints(rank, 4, 2), right, tag=7), dist.irecv(got, left, tag=7)]
    for w in works:
        w.wait()
    out["isend_irecv"] = got.tolist()
    if rank == 0:
        senders = []
        for _ in range(size - 1):
            t = torch.zeros(1, dtype=torch.int64)
            senders.append(dist.recv(t, tag=5))  # a tag of its own: later sends to rank 0 must not match
            out.setdefault("recv_any", []).append([senders[-1], t.item()])
        out["recv_any"].sort()
    else:
        dist.send(torch.tensor([rank * 11]), 0, tag=5)
    got = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, floats(rank, 3), right), dist.P2POp(dist.irecv, got, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["batch_isend_irecv"] = got.tolist()
    # objects
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"})
    out["all_gather_object"] = objs
    lst = [rank, "x"] if rank == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    out["broadcast_object_list"] = lst
    got_objs = [None] * size if rank == 2 else None
    dist.gather_object(("g", rank), got_objs, dst=2)
    if rank == 2:
        out["gather_object"] = got_objs
    mine = [None]
    dist.scatter_object_list(mine, [{"to": r} for r in range(size)] if rank == 0 else None, src=0)
    out["scatter_object_list"] = mine
    if rank == 0:
        dist.send_object_list([{"hello": 1}, [2, 3]], dst=1)
    elif rank == 1:
        box = [None, None]
        dist.recv_object_list(box, src=0)
        out["send_recv_object_list"] = box
    # coalescing: the fast path torch sends to allreduce_coalesced
    tensors = [floats(rank, 5), floats(rank, 3, 2.0)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in tensors:
            dist.all_reduce(t)
    cm.wait()
    out["coalesced_all_reduce"] = [t.tolist() for t in tensors]
    outs = [torch.zeros(size * 2), torch.zeros(size * 3)]
    with dist._coalescing_manager():
        dist.all_gather_single(outs[0], floats(rank, 2))
        dist.all_gather_single(outs[1], floats(rank, 3, 1.0))
    out["coalesced_all_gather_single"] = [t.tolist() for t in outs]
    # sub-groups, overlapping, created by every rank in the same order
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    tail = dist.new_group([1, 2])
    if rank % 2 == 0:
        t = ints(rank, 3)
        dist.all_reduce(t, group=evens)
        out["evens_all_reduce"] = t.tolist()
        t = ints(rank, 2)
        dist.broadcast(t, src=2, group=evens)
        out["evens_broadcast"] = t.tolist()
    if rank in (1, 2):
        t = floats(rank, 4)
        dist.all_reduce(t, group=tail, async_op=True).wait()
        out["tail_all_reduce"] = t.tolist()
        if rank == 1:
            dist.send(ints(rank, 2), 2, group=tail)
        else:
            got = torch.zeros(2, dtype=torch.int64)
            dist.recv(got, 1, group=tail)
            out["tail_send_recv"] = got.tolist()
        if rank == 1:
            dist.send(ints(rank, 2, salt=3), 2, group=tail, tag=9)
        else:
            got = torch.zeros(2, dtype=torch.int64)
            out["tail_recv_any_sender"] = dist.recv(got, group=tail, tag=9)  # the sender's global rank
            out["tail_recv_any"] = got.tolist()
        out["tail_rank"] = dist.get_rank(tail)
    # groups only their members create, and groups by enumeration
    if rank in (0, 1):
        local = dist.new_group([0, 1], use_local_synchronization=True)
        t = ints(rank, 3, salt=4)
        dist.all_reduce(t, group=local)
        out["local_sync_all_reduce"] = t.tolist()
    mine, _ = dist.new_subgroups_by_enumeration([[0, 2], [1]])
    t = ints(rank, 2, salt=6)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=mine)
    out["enumerated_all_reduce"] = t.tolist()
    out["world_size"] = dist.get_world_size()
    if dist.get_backend() == "meshcomm":
        out["meshcomm_only"] = meshcomm_only(rank, size)
    return out


def meshcomm_only(rank: int, size: int) -> dict:
    """Calls gloo does not offer (AVG, PREMUL_SUM, reduce_scatter coalescing, mixed-dtype coalescing)."""
    out: dict = {}
    t = floats(rank, 4)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["avg"] = t.tolist()
    t = floats(rank, 4)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    out["premul_sum"] = t.tolist()
    outs = [torch.zeros(2), torch.zeros(1)]
    with dist._coalescing_manager():
        dist.reduce_scatter_single(outs[0], floats(rank, 2 * size))
        dist.reduce_scatter_single(outs[1], floats(rank, size, 1.0))
    out["coalesced_reduce_scatter_single"] = [o.tolist() for o in outs]
    mixed = [ints(rank, 3), floats(rank, 2)]
    # torch's Python wrapper refuses mixed dtypes; the group itself takes them (C++ callers may pass them).
    dist.group.WORLD.allreduce_coalesced(mixed, dist.AllreduceCoalescedOptions()).wait()
    out["all_reduce_coalesced_mixed"] = [t.tolist() for t in mixed]
    # point-to-point work completed through its future alone, or by polling is_completed()
    import time

    if rank == 0:
        dist.isend(floats(0, 2), 1, tag=11).get_future().wait()
    elif rank == 1:
        got = torch.zeros(2)
        work = dist.irecv(got, 0, tag=11)
        for _ in range(20000):  # bounded: 20 s at most
            if work.is_completed():
                break
            time.sleep(0.001)
        out["irecv_polled"] = [work.is_completed(), got.tolist()]
    pg = dist.group.WORLD
    # a blocking call has already finished when the group returns: no work, which torch's wrappers accept
    blocking = dist.AllreduceOptions()
    blocking.asyncOp = False
    t = floats(rank, 3)
    out["blocking_on_the_group"] = [pg.allreduce([t], blocking) is None, t.tolist()]
    out["two_tensors"] = _failure(lambda: pg.allreduce([floats(rank, 2), floats(rank, 2)]))
    out["meta_tensor"] = _failure(lambda: dist.all_reduce(torch.empty(2, device="meta")))
    # float8 (gloo has none): moved as bytes, reduced in float32 through ml_dtypes
    eight = torch.full((4,), 0.5).to(torch.float8_e4m3fn)
    dist.all_reduce(eight)
    gathered = [torch.empty(1, dtype=torch.float8_e5m2) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([float(rank)]).to(torch.float8_e5m2))
    out["float8"] = [eight.float().tolist(), [g.float().item() for g in gathered]]
    out["backend"] = [dist.get_backend(), pg.name(), type(pg).__name__]
    sub = dist.new_group([0, size - 1])
    out["sub_group_rank"] = dist.get_group_rank(sub, rank) if rank in (0, size - 1) else None
    # the backend's groups are meshcomm Groups: meshcomm's own functions run on them
    import numpy as np

    import meshcomm

    a = np.full(3, rank, dtype=np.float64)
    meshcomm.all_reduce(a, group=pg.meshcomm_group)
    out["meshcomm_on_torch_group"] = a.tolist()
    return out


DDP_CONFIGS = {
    "plain": {},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "find_unused_parameters": {"find_unused_parameters": True},
    "static_graph": {"static_graph": True},
    "fp16_compress_hook": {},
}


class _Net(torch.nn.Module):
    """Enough parameters for several small buckets, and one layer forward never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
            torch.nn.Linear(32, 8))
        self.unused = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def repeated_blocking_all_reduce(rank: int, size: int) -> dict:
    """Kinds of all_reduce on the group, each after one of the same shape ran: [how many times it went through
    meshcomm's API, its result]. On the compiled path the group's allreduce is a compiled step that takes a repeated
    blocking SUM of one CPU tensor straight to the API's lane (native/group_calls.c) and hands everything else to
    the group's Python method."""
    import datetime
    import types

    from meshcomm import native
    from meshcomm.api import collectives

    pg = dist.group.WORLD
    blocking, timed = dist.AllreduceOptions(), dist.AllreduceOptions()
    blocking.asyncOp = timed.asyncOp = False
    timed.timeout = datetime.timedelta(seconds=60)

    def reduced(y: torch.Tensor, call=dist.all_reduce, **kwargs) -> torch.Tensor:
        call(y, **kwargs)
        return y

    def through_group(y: torch.Tensor, opts) -> torch.Tensor:
        pg.allreduce([y], opts)
        return y

    def refused(y: torch.Tensor) -> str:  # numpy() refuses the negative bit, and so does the API
        try:
            dist.all_reduce(y)
        except RuntimeError as exc:
            return "refused: " + ("negative" if "negative bit" in str(exc) else str(exc))
        return "taken"

    calls = {  # each takes this rank's floats(rank, n) and returns the tensor it reduced
        "repeat": (5, reduced),
        "another_shape_first": (7, reduced),
        "another_shape_again": (7, reduced),
        "through_the_group": (5, lambda x: through_group(x, blocking)),
        "async": (5, lambda x: reduced(x, lambda y: dist.all_reduce(y, async_op=True).wait())),
        "max": (5, lambda x: reduced(x, op=dist.ReduceOp.MAX)),
        "own_timeout": (5, lambda x: through_group(x, timed)),
        "needs_grad": (5, lambda x: reduced(x.requires_grad_()).detach()),
        "strided": (10, lambda x: reduced(x[::2])),
        "bfloat16": (5, lambda x: reduced(x.to(torch.bfloat16)).float()),
        "in_a_tuple": (5, lambda x: (pg.allreduce((x,), blocking), x)[1]),
        "options_of_another_kind": (5, lambda x: through_group(x, types.SimpleNamespace(asyncOp=False))),
        "options_by_keyword": (5, lambda x: (pg.allreduce([x], opts=blocking), x)[1]),
        "at_an_offset": (6, lambda x: reduced(x[1:])),  # the shape of "repeat", its bytes from the second element
        "float64_first": (5, lambda x: reduced(x.double())),
        "float64_again": (5, lambda x: reduced(x.double())),
        "float32_again": (5, reduced),
        "negative_bit": (5, lambda x: refused(torch._neg_view(x))),
    }
    dist.all_reduce(floats(rank, 5))  # the API's path, which opens the lane for this shape
    through_api = []
    api_all_reduce = collectives.all_reduce

    def counted(*args, **kwargs):
        through_api.append(1)
        return api_all_reduce(*args, **kwargs)

    out: dict = {"compiled": native.core is not None}
    collectives.all_reduce = counted
    try:
        for name, (n, call) in calls.items():
            del through_api[:]
            result = call(floats(rank, n))
            out[name] = [len(through_api), result if isinstance(result, str) else result.tolist()]
    finally:
        collectives.all_reduce = api_all_reduce
    return out


def ddp_training(rank: int, size: int, steps: int = 4) -> dict:
    """Per configuration: every step's gradients and the final parameters of a small DDP model."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    for name, options in DDP_CONFIGS.items():
        torch.manual_seed(1234 + rank)  # different initial weights per rank: DDP must broadcast rank 0's
        net = _Net()
        if name != "find_unused_parameters":
            net.unused = None
        model = DDP(net, bucket_cap_mb=0.002, **options)  # ~2 KB buckets: several per step
        if name == "fp16_compress_hook":
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = torch.Generator().manual_seed(99 + rank)
        grads = []
        for _ in range(steps):
            x = torch.randn(6, 16, generator=data)
            y = torch.randn(6, 8, generator=data)
            optim.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            grads.append([None if p.grad is None else p.grad.tolist() for p in model.parameters()])
            optim.step()
        out[name] = {
            "grads": grads,
            "params": [p.detach().tolist() for p in model.parameters()],
            "buckets": len(model.reducer._get_zeros_like_grad_buckets()),
            "logging": {k: v for k, v in model._get_ddp_logging_data().items() if "bucket" in k},
        }
    return out


def error_paths(rank: int, size: int) -> dict:
    """Mismatches, timeouts and a lost peer, each surfacing as an exception where torch code runs."""
    import datetime

    from torch.nn.parallel import DistributedDataParallel as DDP

    out: dict = {}
    # Each scenario on its own group, so what a failed collective leaves behind cannot touch the next.
    group = dist.new_group([0, 1])
    out["mismatch_sync"] = _failure(lambda: dist.all_reduce(torch.zeros(4 + rank), group=group))
    group = dist.new_group([0, 1])
    work = dist.all_reduce(torch.zeros(3, dtype=torch.float32 if rank == 0 else torch.int32), group=group,
                           async_op=True)
    out["mismatch_async_wait"] = _failure(work.wait)
    out["mismatch_async_future"] = _failure(lambda: work.get_future().wait())
    out["mismatch_async_state"] = [work.is_completed(), work.is_success(), type(work.exception()).__name__]
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1.5))
    if rank == 0:
        out["timeout"] = _failure(lambda: dist.broadcast(torch.zeros(2), src=1, group=group))
    # Rank 1 is about to die: rank 0 reports for both.
    reports: list = [None] * size
    dist.all_gather_object(reports, out)
    out = {"reports": reports}
    # A peer lost during DDP's backward: the surviving rank's backward raises.
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 4))
    model(torch.ones(2, 4)).sum().backward()
    if rank == 1:
        import os

        os._exit(0)
    out["ddp_backward_peer_lost"] = _failure(lambda: model(torch.ones(2, 4)).sum().backward())
    return out


def functional_and_mesh(rank: int, size: int) -> dict:
    """torch.distributed._functional_collectives, DeviceMesh and DTensor (they reach the group from C++ by name)."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    out: dict = {}
    world = dist.group.WORLD
    out["all_reduce"] = funcol.all_reduce(floats(rank, 4), "sum", world).tolist()
    out["all_reduce_avg"] = funcol.all_reduce(floats(rank, 4), "avg", world).tolist()
    out["all_gather_tensor"] = funcol.all_gather_tensor(ints(rank, 3), 0, world).tolist()
    out["reduce_scatter_tensor"] = funcol.reduce_scatter_tensor(ints(rank, 2 * size), "sum", 0, world).tolist()
    out["all_to_all_single"] = funcol.all_to_all_single(
        torch.arange(size, dtype=torch.int64) + 10 * rank, None, None, world).tolist()
    out["broadcast"] = funcol.broadcast(ints(rank, 3), 1, world).tolist()
    out["all_reduce_coalesced"] = [t.tolist() for t in funcol.all_reduce_coalesced(
        [floats(rank, 2), floats(rank, 3, 1.0)], "sum", world)]
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    out["mesh_ranks"] = [dist.get_process_group_ranks(mesh.get_group(d)) for d in ("dp", "tp")]
    out["mesh_backend"] = [dist.get_backend(mesh.get_group(d)) for d in ("dp", "tp")]
    out["mesh_tp_all_reduce"] = funcol.all_reduce(ints(rank, 3), "sum", (mesh, 1)).tolist()
    t = ints(rank, 2)
    dist.all_reduce(t, group=mesh.get_group("dp"))
    out["mesh_dp_all_reduce"] = t.tolist()
    torch.manual_seed(5)
    full = torch.randn(size * 2, 3)
    sharded = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    out["dtensor_local"] = sharded.to_local().tolist()
    out["dtensor_full"] = sharded.full_tensor().tolist()
    out["dtensor_redistribute"] = sharded.redistribute(mesh, [Replicate(), Replicate()]).to_local().tolist()
    out["dtensor_sum"] = sharded.sum().full_tensor().item()
    return out


def meshcomm_group_in_a_gloo_world(rank: int, size: int) -> dict:
    """A "meshcomm" sub-group of a job whose default group runs on gloo (it opens connections of its own)."""
    group = dist.new_group(list(range(size)), backend="meshcomm")
    t = ints(rank, 4)
    dist.all_reduce(t, group=group)
    gloo_sum = ints(rank, 4)
    dist.all_reduce(gloo_sum)
    return {"backends": [dist.get_backend(), dist.get_backend(group)], "same_sum": t.tolist() == gloo_sum.tolist(),
            "sum": t.tolist()}

"""A torch.distributed program in the usual shape, run with either library behind `dist`.

    python torch_program.py torch|meshcomm WORLD_SIZE OUT_DIR

It is spawned with torch.multiprocessing.spawn, finds the store through
MASTER_ADDR/MASTER_PORT, calls init_process_group("gloo", rank=r, world_size=n)
and writes what every collective produced to OUT_DIR/rank<r>.json.
"""

import json
import os
import sys

import torch
import torch.multiprocessing as mp

if sys.argv[1] == "torch":
    import torch.distributed as dist
else:
    import meshcomm as dist


def ints(rank, n, salt=0):
    return (torch.arange(n, dtype=torch.int64) * 3 + rank * 5 + salt) % 7 + 1


def floats(rank, n, salt=0):
    return torch.linspace(-1, 1, n, dtype=torch.float32) * (rank + 1) + salt


def run(rank, world_size, out_dir):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    out = {}
    for name, op in [("sum", dist.ReduceOp.SUM), ("product", dist.ReduceOp.PRODUCT), ("min", dist.ReduceOp.MIN),
                     ("max", dist.ReduceOp.MAX), ("band", dist.ReduceOp.BAND), ("bor", dist.ReduceOp.BOR),
                     ("bxor", dist.ReduceOp.BXOR)]:
        t = ints(rank, 9)
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{name}"] = t.tolist()
    f = floats(rank, 1001)
    dist.all_reduce(f)
    out["all_reduce_float"] = f.tolist()
    t = ints(rank, 6)
    dist.broadcast(t, src=world_size - 1)
    out["broadcast"] = t.tolist()
    t = ints(rank, 5)
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    out["reduce"] = t.tolist()
    gathered = [torch.zeros(4, dtype=torch.int64) for _ in range(world_size)]
    dist.all_gather(gathered, ints(rank, 4))
    out["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(world_size * 3, dtype=torch.float32)
    dist.all_gather_into_tensor(flat, floats(rank, 3))
    out["all_gather_into_tensor"] = flat.tolist()
    rs = torch.zeros(2, dtype=torch.int64)
    dist.reduce_scatter_tensor(rs, ints(rank, 2 * world_size))
    out["reduce_scatter_tensor"] = rs.tolist()
    bucket = [torch.zeros(3, dtype=torch.int64) for _ in range(world_size)] if rank == 0 else None
    dist.gather(ints(rank, 3), bucket, dst=0)
    out["gather"] = [b.tolist() for b in bucket] if bucket else None
    piece = torch.zeros(3, dtype=torch.int64)
    dist.scatter(piece, [ints(r, 3, salt=1) for r in range(world_size)] if rank == 0 else None, src=0)
    out["scatter"] = piece.tolist()
    a2a = torch.zeros(world_size * 2, dtype=torch.int64)
    dist.all_to_all_single(a2a, torch.arange(world_size * 2, dtype=torch.int64) + 100 * rank)
    out["all_to_all_single"] = a2a.tolist()
    send = [(rank + j) % 3 for j in range(world_size)]
    recv = [(q + rank) % 3 for q in range(world_size)]
    uneven = torch.zeros(sum(recv), dtype=torch.int64)
    dist.all_to_all_single(uneven, torch.arange(sum(send), dtype=torch.int64) + 10 * rank, recv, send)
    out["all_to_all_single_uneven"] = uneven.tolist()
    noncontig = torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (rank + 1)
    dist.all_reduce(noncontig)
    out["non_contiguous"] = noncontig.tolist()
    objs = [None] * world_size
    dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"})
    out["all_gather_object"] = objs
    lst = [rank, "x"] if rank == 1 % world_size else [None, None]
    dist.broadcast_object_list(lst, src=1 % world_size)
    out["broadcast_object_list"] = lst
    sub = dist.new_group([r for r in range(world_size) if r % 2 == 0])
    if rank % 2 == 0:
        t = ints(rank, 3)
        dist.all_reduce(t, group=sub)
        out["new_group_all_reduce"] = t.tolist()
    work = dist.all_reduce(ints(rank, 3), async_op=True)
    work.wait()
    dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
        json.dump(out, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[2])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    mp.spawn(run, args=(world_size, sys.argv[3]), nprocs=world_size, join=True)

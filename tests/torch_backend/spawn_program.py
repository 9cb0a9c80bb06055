"""Started by torch.multiprocessing.spawn: `python spawn_program.py WORLD_SIZE PORT`; prints every rank's all_reduce."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank: int, world_size: int, results) -> None:
    dist.init_process_group("meshcomm", rank=rank, world_size=world_size)  # store at MASTER_ADDR:MASTER_PORT
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t)
    results.put((rank, t.tolist()))
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(run, args=(size, queue), nprocs=size, join=True)
    print(sorted(queue.get() for _ in range(size)))

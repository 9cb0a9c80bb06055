"""One rank of a job whose rank 0 (root of every rooted call, and host of the store) leaves right after its last
call; the others check every result.

    python leave_early_program.py COLLECTIVE COUNT {destroy,exit}

Ranks are started as plain processes (tests.ranks.run_program), the way a tutorial's multiprocessing ranks are:
rank 0 serves the store. Rank 0 runs three calls of COLLECTIVE on COUNT elements and then leaves, with
destroy_process_group() or without; the others start each call a little later (they sleep a random while
first), so that rank 0's exit races their calls. Every rank prints `RESULT rank ok` when its results were right.
"""

import random
import sys
import time

import numpy as np

import meshcomm as dist

collective, count, leaving = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()
random.seed(rank)
wrong = []


def check(name, got, expected) -> None:
    if not np.array_equal(got, expected):
        wrong.append(name)


for call in range(3):
    if rank != 0:
        time.sleep(random.random() * 0.02)
    mine = np.arange(count, dtype=np.int64) + 1000 * rank + call
    ranks = np.arange(size)[:, None] * 1000 + call + np.arange(count)[None, :]  # every rank's `mine`, in rows
    if collective == "all_reduce":
        dist.all_reduce(mine)
        check(collective, mine, ranks.sum(axis=0))
    elif collective == "broadcast":
        dist.broadcast(mine, src=0)
        check(collective, mine, ranks[0])
    elif collective == "reduce":
        dist.reduce(mine, dst=0)
        if rank == 0:
            check(collective, mine, ranks.sum(axis=0))
    elif collective == "all_gather":
        out = [np.empty(count, dtype=np.int64) for _ in range(size)]
        dist.all_gather(out, mine)
        check(collective, np.stack(out), ranks)
    elif collective == "gather":
        out = [np.empty(count, dtype=np.int64) for _ in range(size)] if rank == 0 else None
        dist.gather(mine, out, dst=0)
        if rank == 0:
            check(collective, np.stack(out), ranks)
    elif collective == "scatter":
        out = np.empty(count, dtype=np.int64)
        dist.scatter(out, [ranks[r] for r in range(size)] if rank == 0 else None, src=0)
        check(collective, out, ranks[rank])
    elif collective == "reduce_scatter":
        out = np.empty(count, dtype=np.int64)
        dist.reduce_scatter(out, [mine + r for r in range(size)])
        check(collective, out, ranks.sum(axis=0) + size * rank)
    elif collective == "all_to_all":
        out = np.empty(count * size, dtype=np.int64)
        dist.all_to_all_single(out, np.tile(mine, size))
        check(collective, out, ranks.reshape(-1))
    elif collective == "barrier":
        dist.barrier()
    elif collective == "send":
        if rank == 0:
            for peer in range(1, size):
                dist.send(ranks[peer], dst=peer)
        else:
            out = np.empty(count, dtype=np.int64)
            dist.recv(out, src=0)
            check(collective, out, ranks[rank])
    else:
        raise SystemExit(f"unknown collective {collective}")
print(f"RESULT {rank} {'ok' if not wrong else wrong}", flush=True)
if rank != 0 or leaving == "destroy":
    dist.destroy_process_group()

"""One rank of the shrink soak (benchmarks/shrink_soak.py): mixed collectives, every result checked against
numpy; when a rank is lost, shrink and carry on.

    python shrink_soak_program.py OUT_DIR SECONDS

Ranks are plain processes (rank 0 serves the store, and may be killed with it). Every rank draws step s's
collective and size from seed s, so after a shrink the survivors agree on the step to resume at (the lowest any
of them had not finished) and run the same sequence again. Every 10 steps they agree whether SECONDS have passed,
so they stop together. Each survivor writes OUT_DIR/rank<first rank>.json.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

import meshcomm as dist

out_dir, seconds = Path(sys.argv[1]), float(sys.argv[2])
dist.init_process_group(timeout=60)
first_rank = dist.get_rank()
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")


def one_step(step: int) -> bool:
    """Step `step`'s collective on this group; whether its result is exact."""
    rank, size = dist.get_rank(), dist.get_world_size()
    draw = np.random.default_rng(step)
    name = COLLECTIVES[draw.integers(len(COLLECTIVES))]
    count = int(draw.choice([1, 7, 300, 5000])) * size
    rows = (np.arange(size)[:, None] * 1000 + step % 97 + np.arange(count)[None, :]).astype(np.int64)
    mine = rows[rank].copy()
    if name == "all_reduce":
        dist.all_reduce(mine)
        return np.array_equal(mine, rows.sum(axis=0))
    if name == "broadcast":
        root = step % size
        dist.broadcast(mine, src=root)
        return np.array_equal(mine, rows[root])
    if name == "all_gather":
        out = [np.empty(count, dtype=np.int64) for _ in range(size)]
        dist.all_gather(out, mine)
        return np.array_equal(np.stack(out), rows)
    if name == "reduce_scatter":
        out = np.empty(count // size, dtype=np.int64)
        dist.reduce_scatter(out, list(np.split(mine, size)))
        return np.array_equal(out, np.split(rows.sum(axis=0), size)[rank])
    out = [np.empty(count // size, dtype=np.int64) for _ in range(size)]
    dist.all_to_all(out, list(np.split(mine, size)))
    return np.array_equal(np.stack(out), np.stack([np.split(rows[r], size)[rank] for r in range(size)]))


def agreed_step(step: int) -> int:
    resume = np.array([step], dtype=np.int64)
    dist.all_reduce(resume, op=dist.ReduceOp.MIN)
    return int(resume[0])


step = calls = wrong = 0
shrinks = []
end = time.monotonic() + seconds
while True:
    try:
        if step % 10 == 0:
            over = np.array([time.monotonic() > end], dtype=np.int64)
            dist.all_reduce(over, op=dist.ReduceOp.MAX)
            if over[0]:
                break
        exact = one_step(step)
        calls += 1
        wrong += not exact
        step += 1
    except dist.MeshcommError as exc:
        noticed = time.monotonic()
        while True:  # another rank may be lost while the survivors regroup: shrink again
            try:
                dist.shrink()
                shrunk = time.monotonic()
                step = agreed_step(step)
                break
            except dist.MeshcommError:
                continue
        shrinks.append({"size": dist.get_world_size(), "noticed": noticed, "shrunk": shrunk,
                        "error": type(exc).__name__})
(out_dir / f"rank{first_rank}.json").write_text(json.dumps(
    {"first_rank": first_rank, "calls": calls, "wrong": wrong, "shrinks": shrinks, "size": dist.get_world_size(),
     "steps": step}))
dist.destroy_process_group()

"""One rank of a job whose ranks run different per-call paths (MESHCOMM_NATIVE differs): results must not.

Prints `RESULT rank <digest>` of every result; every rank of the job computes the same digest.
"""

import hashlib

import numpy as np

import meshcomm as dist
from meshcomm import native


def scattered_and_gathered_back(count: int, call: int) -> bytes:
    """A scatter from the last rank, its blocks gathered at rank 0 and broadcast: what every rank gets alike."""
    parts = [np.arange(count, dtype=np.int64) * (q + 1) + call for q in range(size)] if rank == size - 1 else None
    mine = np.empty(count, dtype=np.int64)
    dist.scatter(mine, parts, src=size - 1, algorithm="direct")
    blocks = [np.empty(count, dtype=np.int64) for _ in range(size)] if rank == 0 else None
    dist.gather(mine, blocks, dst=0, algorithm="direct")
    whole = np.concatenate(blocks) if rank == 0 else np.empty(count * size, dtype=np.int64)
    dist.broadcast(whole, src=0, algorithm="direct")
    return whole.tobytes()


dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()
digest = hashlib.sha256()
for call in range(40):  # more calls than a member has slots: slots are reused across the two paths
    x = np.arange(7, dtype=np.float32) * (rank + 1) + call
    dist.all_reduce(x, algorithm="direct")
    digest.update(x.tobytes())
    out = np.empty(4 * size, dtype=np.int64)
    dist.all_to_all_single(out, np.arange(4 * size, dtype=np.int64) + 100 * rank + call, algorithm="direct")
    gathered = [np.empty(4, dtype=np.int64) for _ in range(size)]
    dist.all_gather(gathered, out[:4], algorithm="direct")
    digest.update(b"".join(g.tobytes() for g in gathered))
    y = np.full(3, call, dtype=np.int64)
    dist.broadcast(y if rank == 0 else np.zeros(3, dtype=np.int64), src=0, algorithm="direct")
    digest.update(scattered_and_gathered_back(5, call))
# int64s: more than a board slot holds, so posts go by reference; staged (1 to 2 MiB); larger than a staging area
for large in ((256 << 10) // 8 + 5, (1 << 20) // 8 + 5, (2 << 20) // 8 + 5):
    for call in range(3):
        out = np.empty(size * large, dtype=np.int64)
        dist.all_to_all_single(out, np.arange(size * large, dtype=np.int64) * (rank + 1) + call,
                               algorithm="direct")
        gathered = [np.empty(large, dtype=np.int64) for _ in range(size)]
        dist.all_gather(gathered, out[:large], algorithm="direct")
        digest.update(b"".join(g.tobytes() for g in gathered))
        y = np.arange(large, dtype=np.int64) + call if rank == size - 1 else np.zeros(large, dtype=np.int64)
        dist.broadcast(y, src=size - 1, algorithm="direct")
        digest.update(y.tobytes())
        digest.update(scattered_and_gathered_back(large, call))
print(f"RESULT {rank} {'compiled' if native.core is not None else 'python'} {digest.hexdigest()}", flush=True)
dist.destroy_process_group()

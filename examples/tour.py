"""A tour of every primitive on each rank's data, before and after: `meshcomm run -n 4 examples/tour.py`.

Each section prints, per rank, what the rank held before and after the call.
Output lines from different ranks interleave; the barrier after each section
keeps the sections apart.
"""

import numpy as np

import meshcomm as dist

dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()


def show(title: str, before, after) -> None:
    dist.barrier()
    if rank == 0:
        print(f"\n== {title}")
    dist.barrier()
    print(f"rank {rank}: before {before}  after {after}")
    dist.barrier()


def row(values) -> str:
    return "[" + " ".join(f"{v:g}" for v in np.asarray(values).ravel()) + "]"


x = np.arange(4, dtype=np.float32) + 10 * rank
before = row(x)
dist.broadcast(x, src=0)
show("broadcast from rank 0 (everyone gets rank 0's row)", before, row(x))

x = np.arange(4, dtype=np.float32) + 10 * rank
before = row(x)
dist.reduce(x, dst=0)
show("reduce (sum) to rank 0 (only rank 0's row changes)", before, row(x))

x = np.arange(4, dtype=np.float32) + 10 * rank
before = row(x)
dist.all_reduce(x)
show("all_reduce (sum): every rank gets the column sums", before, row(x))

x = np.array([rank, rank], dtype=np.float32)
out = np.zeros((size, 2), dtype=np.float32)
dist.all_gather_into_tensor(out, x)
show("all_gather: rows of every rank stacked, on every rank", row(x), row(out))

x = np.arange(size, dtype=np.float32) + 10 * rank
out = np.zeros(1, dtype=np.float32)
dist.reduce_scatter_tensor(out, x)
show("reduce_scatter (sum): rank r keeps the sum of column r", row(x), row(out))

x = np.array([rank * 1.0])
bucket = [np.zeros(1) for _ in range(size)] if rank == 0 else None
dist.gather(x, bucket, dst=0)
show("gather to rank 0: a column of everyone's values", row(x), row(bucket) if bucket else "-")

pieces = [np.array([100.0 + r]) for r in range(size)] if rank == 0 else None
out = np.zeros(1)
dist.scatter(out, pieces, src=0)
show("scatter from rank 0: rank r gets piece r", row(pieces) if pieces else "-", row(out))

x = np.arange(size, dtype=np.int64) + 10 * rank
out = np.zeros(size, dtype=np.int64)
dist.all_to_all_single(out, x)
show("all_to_all: a transpose - rank r gets column r of the matrix", row(x), row(out))

x = np.array([rank + 1], dtype=np.int64)
before = row(x)
dist.scan(x)
show("scan (inclusive prefix sum)", before, row(x))

objs = [None] * size
dist.all_gather_object(objs, {"rank": rank, "square": rank * rank})
show("all_gather_object: any picklable object", {"rank": rank}, objs)

dist.barrier()
if rank == 0:
    print("\nbarrier passed: every rank reached the end of the tour")
dist.destroy_process_group()

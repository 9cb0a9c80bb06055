"""A tour of every primitive on each rank's data, before and after: `meshcomm run -n 4 examples/tour.py`.

Each section shows, per rank, what the rank held before and after the call.
Rank 0 gathers every rank's line (gather_object) and prints them in rank
order: lines printed by the ranks themselves would reach the terminal in
whatever order the launcher reads them.
"""

import numpy as np

import meshcomm as dist

dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()


def show(title: str, before, after) -> None:
    lines = [None] * size if rank == 0 else None
    dist.gather_object(f"rank {rank}: before {before}  after {after}", lines, dst=0)
    if rank == 0:
        print(f"\n== {title}")
        print("\n".join(lines), flush=True)


def row(values) -> str:
    return "[" + " ".join(f"{v:g}" for v in np.asarray(values).ravel()) + "]"


right, left = (rank + 1) % size, (rank - 1) % size
x = np.array([rank], dtype=np.int64)
got = np.full(1, -1, dtype=np.int64)
requests = [dist.isend(x, dst=right), dist.irecv(got, src=left)]
for request in requests:
    request.wait()
show("isend / irecv around a ring: rank r sends to r + 1, receives from r - 1", row(x), row(got))

got = np.full(1, -1, dtype=np.int64)
before = row(got)
if rank == 0:
    dist.send(np.array([42], dtype=np.int64), dst=size - 1)  # to itself when it is alone: that works too
if rank == size - 1:
    dist.recv(got, src=0)
show(f"send / recv: rank 0 sends 42 to rank {size - 1}", before, row(got))

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
show("all_to_all_single: a transpose - rank r gets column r of the matrix", row(x), row(out))

sent = [np.array([10 * rank + j]) for j in range(size)]
received = [np.zeros(1, dtype=np.int64) for _ in range(size)]
dist.all_to_all(received, sent)
show("all_to_all (lists): piece j goes to rank j", row(sent), row(received))

x = np.array([rank + 1], dtype=np.int64)
before = row(x)
dist.scan(x)
show("scan (inclusive prefix sum)", before, row(x))

x = np.array([rank + 1], dtype=np.int64)
before = row(x)
dist.exscan(x)
show("exscan (exclusive prefix sum; rank 0 keeps its value)", before, row(x))

objs = [None] * size
dist.all_gather_object(objs, {"rank": rank, "square": rank * rank})
show("all_gather_object: any picklable object", {"rank": rank}, objs)

dist.barrier()
if rank == 0:
    print("\nbarrier passed: every rank reached the end of the tour")
dist.destroy_process_group()

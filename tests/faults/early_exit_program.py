"""One rank of a job whose rank 0 (it serves the store) leaves right after its last call.

Ranks 0 and 1 make one all_reduce on their group and exit (rank 0 without
destroy_process_group). Ranks 2 and 3 make their group's first call later:
its board is made through the store, which must still be there.
"""

import sys
import time

import numpy as np

import meshcomm as dist

dist.init_process_group()
rank = dist.get_rank()
pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
mine = pairs[rank // 2]
x = np.full(3, rank + 1, dtype=np.int64)
if rank >= 2:
    time.sleep(float(sys.argv[1]))
dist.all_reduce(x, group=mine)
print(f"RESULT {rank} {x.tolist()}", flush=True)
if rank != 0:
    dist.destroy_process_group()

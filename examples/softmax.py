"""Distributed softmax and L2 normalisation of a vector split across ranks, from all_reduce alone."""

import numpy as np

import meshcomm as dist
from meshcomm import ReduceOp

dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()

# The full vector is 0..4*size-1 scaled; each rank owns 4 consecutive entries.
full = np.linspace(-2.0, 3.0, 4 * size)
mine = full[4 * rank : 4 * rank + 4].copy()

# softmax: subtract the global max (for stability), then divide by the global sum of exps.
peak = np.array([mine.max()])
dist.all_reduce(peak, op=ReduceOp.MAX)
exps = np.exp(mine - peak[0])
total = np.array([exps.sum()])
dist.all_reduce(total)
softmax = exps / total[0]

# L2 normalisation: divide by the global norm.
squares = np.array([np.square(mine).sum()])
dist.all_reduce(squares)
normalised = mine / np.sqrt(squares[0])

reference_softmax = np.exp(full - full.max()) / np.exp(full - full.max()).sum()
reference_norm = full / np.linalg.norm(full)
assert np.allclose(softmax, reference_softmax[4 * rank : 4 * rank + 4])
assert np.allclose(normalised, reference_norm[4 * rank : 4 * rank + 4])
print(f"rank {rank}: softmax {np.round(softmax, 4)}  l2-normalised {np.round(normalised, 4)}  (match the single-process result)")
dist.destroy_process_group()

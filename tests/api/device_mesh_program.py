"""A rank of a job that builds a 2 x 2 device mesh through `dist.device_mesh`, without init_process_group first."""

import numpy as np

import meshcomm as dist

mesh = dist.device_mesh.init_device_mesh("cpu", (2, 2), mesh_dim_names=("row", "col"))
x = np.full(1, dist.get_rank(), dtype=np.int64)
dist.all_reduce(x, group=mesh.get_group("col"))  # the ranks of this rank's row
print(f"RESULT {dist.get_rank()} {mesh.get_coordinate()} {int(x[0])}", flush=True)
dist.destroy_process_group()

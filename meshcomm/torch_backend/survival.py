"""After a lost rank: torch.distributed's default "meshcomm" group, made again over the survivors.

    try:
        loss.backward()                       # DDP all-reduces here
    except RuntimeError:
        shrink_default_group()                # torch.distributed now runs on the survivors
        model = DDP(model.module)             # wrap again: DDP holds its group

The survivors agree on who is left (meshcomm.group.survival, over the processes' lifelines, so the failed rank may
have hosted the job's store), then re-initialize torch.distributed among themselves through a new TCPStore that
the lowest survivor hosts. Ranks are renumbered 0..n-1 in their old order.
"""

from __future__ import annotations

import datetime

import numpy as np
import torch.distributed as dist

from meshcomm.api.collectives import broadcast
from meshcomm.group import survival
from meshcomm.torch_backend import creator


def shrink_default_group(timeout: float | None = None) -> tuple[int, int]:
    """Re-initialize torch.distributed's default group on the ranks still alive; this rank's new (rank, size).

    Every survivor must call it, after its call on the default group failed. The default group must be a
    "meshcomm" group (init_process_group("meshcomm"))."""
    runtime = creator._world
    if runtime is None:
        raise RuntimeError('shrink_default_group() needs torch.distributed\'s default group to be a "meshcomm" '
                           'group: call init_process_group("meshcomm") first')
    survivors = survival.shrink(runtime.world, timeout)  # retires the old runtime (torch's old group with it)
    try:
        rank, size = survivors.rank, survivors.size
        host = survivors.runtime.lifelines[0].rsplit(":", 1)[0]  # where the lowest survivor can be reached
        wait = datetime.timedelta(seconds=survivors.timeout)
        store = dist.TCPStore(host, 0, size, is_master=True, timeout=wait, wait_for_workers=False) if rank == 0 else None
        port = np.array([store.port if store is not None else 0], dtype=np.int64)
        broadcast(port, src=0, group=survivors)
        if store is None:
            store = dist.TCPStore(host, int(port[0]), size, is_master=False, timeout=wait)
        dist.destroy_process_group()
        dist.init_process_group("meshcomm", store=store, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=survivors.timeout))
    finally:
        survivors.runtime.close()  # it served the agreement; torch's new group has its own runtime
    return rank, size

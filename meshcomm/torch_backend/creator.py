"""The function torch calls to create a "meshcomm" process group: it builds (or reuses) the meshcomm runtime."""

from __future__ import annotations

import os
import zlib
from typing import Any

import torch.distributed as dist

from meshcomm.group.runtime import Runtime
from meshcomm.rendezvous import init_method as rendezvous
from meshcomm.rendezvous.torch_store import TorchStore
from meshcomm.torch_backend.process_group import MeshcommProcessGroup

# The runtime behind torch's default group when that group is ours; its
# sub-groups share its connections instead of opening their own.
_world: Runtime | None = None


def _group_id(name: str) -> int:
    """A message-key group id every member derives alike from torch's group name.

    torch creates a sub-group's backend on its members only, so meshcomm's
    call-order counter would disagree between ranks; the name does not. Ids
    from the name stay at or above 2**31, clear of that counter's ids.
    """
    return zlib.crc32(name.encode()) | 0x8000_0000


def _start_runtime(store: Any, rank: int, size: int, timeout: float) -> Runtime:
    """Connect `size` processes through torch's (prefix) store, meshcomm's usual way."""
    wrapped = TorchStore(store, timeout)
    rendezvous.join(wrapped, rank, size, timeout)
    # Peers dial the address of the interface that reaches the master (torchrun and meshcomm run set it).
    return Runtime(rank, size, wrapped, timeout, os.environ.get("MASTER_ADDR"), "meshcomm")


def create(opts: Any, pg_options: Any = None) -> MeshcommProcessGroup:
    """torch's extended-API backend creator: `opts` carries store, group_rank, group_size, timeout,
    group_id (the group's name) and global_ranks_in_group."""
    global _world
    timeout = opts.timeout.total_seconds()
    name = str(opts.group_id)
    rank, size = int(opts.group_rank), int(opts.group_size)
    if not dist.is_initialized():
        # torch sets its default group only after this returns: this is the default group.
        if _world is not None:
            _close_world(_world)
        runtime = _start_runtime(opts.store, rank, size, timeout)
        _world = runtime
        return MeshcommProcessGroup(runtime.world, name, lambda: _close_world(runtime))
    ranks = tuple(int(r) for r in opts.global_ranks_in_group) or tuple(range(size))
    if _world is not None and len(ranks) == size and _world.rank in ranks:
        group = _world.new_group(ranks, timeout, name, group_id=_group_id(name))
        return MeshcommProcessGroup(group, name, group.shutdown)
    # The default group runs on another backend: this group gets connections of its own.
    runtime = _start_runtime(opts.store, rank, size, timeout)
    runtime.world.group_name = name
    return MeshcommProcessGroup(runtime.world, name, lambda: _close_world(runtime))


def _close_world(runtime: Runtime) -> None:
    """Close a runtime once (torch may shut a group down more than once)."""
    global _world
    if _world is runtime:
        _world = None
    if not runtime.world.destroyed:
        runtime.close()


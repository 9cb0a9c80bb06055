"""Run one function on every rank of a fresh torch.distributed job (meshcomm or gloo), bounded in time.

Each rank is a fresh process (tests.ranks.run_function) that calls
`torch.distributed.init_process_group(backend)` through MASTER_ADDR/PORT,
runs `fn(rank, world_size, *args)` and reports what it returned (or its
traceback). Every process is reaped before `run` returns, also when one
hangs or dies.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os

from tests.ranks import free_port, run_function


def _rank(rank: int, size: int, port: int, backend: str, init_timeout: float, fn, *args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)
    import torch.distributed as dist

    dist.init_process_group(backend, rank=rank, world_size=size, timeout=datetime.timedelta(seconds=init_timeout))
    result = fn(rank, size, *args)
    dist.destroy_process_group()
    return result


def _context():
    """Ranks fork from a server that imported torch once (forkserver), instead of each importing it anew.

    The server is single-threaded and has nothing of torch.distributed
    initialized, so children start clean; it exits with the test session.
    """
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([
        "torch", "torch.distributed", "torch.nn.parallel", "torch.distributed.algorithms.ddp_comm_hooks",
        "torch.distributed.device_mesh", "torch.distributed.tensor", "tests.torch_backend.programs"])
    return ctx


def run(fn, world_size: int, backend: str = "meshcomm", *args, timeout: float = 90.0,
        init_timeout: float = 30.0, env: dict | None = None, may_die: frozenset[int] = frozenset()) -> list:
    """fn(rank, world_size, *args) on every rank; the list of results, or RankError naming what failed.

    A rank in `may_die` that exits without reporting (a test killing it on
    purpose) gets None as its result.
    """
    return run_function(_rank, world_size, free_port(), backend, init_timeout, fn, *args, timeout=timeout,
                        env=env, may_die=may_die, context=_context())

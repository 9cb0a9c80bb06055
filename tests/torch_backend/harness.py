"""Run one function on every rank of a fresh torch.distributed job (meshcomm or gloo), bounded in time.

Each rank is a fresh process that calls
`torch.distributed.init_process_group(backend)` through MASTER_ADDR/PORT,
runs `fn(rank, world_size, *args)` and reports what it returned (or its
traceback). Every process is reaped before `run` returns, also when one
hangs or dies.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import queue
import time
import traceback

from tests.cluster import RankError, free_port


def _main(rank: int, size: int, port: int, backend: str, init_timeout: float, fn, args, outbox, env: dict) -> None:
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    try:
        import torch

        torch.set_num_threads(1)
        import torch.distributed as dist

        dist.init_process_group(backend, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=init_timeout))
        result = fn(rank, size, *args)
        dist.destroy_process_group()
    except BaseException as exc:  # reported to the test, which fails with it
        outbox.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    outbox.put((rank, True, result))


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
    ctx = _context()
    outbox = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_main, args=(r, world_size, port, backend, init_timeout, fn, args, outbox, env or {}),
                         daemon=True) for r in range(world_size)]
    for p in procs:
        p.start()
    results: dict[int, object] = {}
    failures: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    clean = False
    try:
        while len(results) + len(failures) < world_size:
            remaining = deadline - time.monotonic()
            try:
                rank, ok, value = outbox.get(timeout=max(min(remaining, 0.5), 0.01))
            except queue.Empty:
                gone = [r for r, p in enumerate(procs)
                        if not p.is_alive() and r not in results and r not in failures]
                for r in gone:
                    if r in may_die:
                        results[r] = None
                dead = [r for r in gone if r not in may_die]
                if remaining <= 0 or dead:
                    missing = sorted(set(range(world_size)) - set(results) - set(failures))
                    why = f"ranks {dead} died" if dead else f"no answer within {timeout:.0f} s"
                    raise RankError({**failures, **{r: why for r in missing}}) from None
                continue
            (results if ok else failures)[rank] = value
        if failures:
            raise RankError(failures)
        clean = True
        return [results[r] for r in range(world_size)]
    finally:
        for p in procs:
            p.join(timeout=20 if clean else 0)
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)
        outbox.close()
        outbox.join_thread()

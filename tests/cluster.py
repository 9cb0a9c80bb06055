"""A set of real rank processes that stay up across tests and run the functions they are sent.

Starting processes is the slow part of a distributed test, so each world size
gets one cluster per test session. Every call has a deadline; a cluster whose
call timed out or whose rank died is torn down (every process killed and
reaped) and started afresh for the next test.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import time
import traceback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_job_env() -> dict[str, str]:
    """This process's environment without what a launcher sets (MESHCOMM_*, RANK*, WORLD_SIZE*, MASTER_*): a job
    a test starts with it (meshcomm run, torchrun, a spawning script) is a job of its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MESHCOMM_", "RANK", "WORLD_SIZE", "MASTER_"))}


def _serve(rank: int, size: int, port: int, inbox, outbox, env: dict) -> None:
    # A list value gives each rank its own (e.g. MESHCOMM_HOST_ID to fake hosts).
    os.environ.update({k: v[rank] if isinstance(v, list) else v for k, v in env.items()})
    import meshcomm as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size, timeout=30)
    except BaseException:
        outbox.put((rank, False, traceback.format_exc()))
        return
    outbox.put((rank, True, "ready"))
    while True:
        item = inbox.get()
        if item is None:
            break
        fn, args = item
        try:
            outbox.put((rank, True, fn(*args)))
        except BaseException as exc:  # reported to the test, which fails with it
            outbox.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    dist.destroy_process_group()


class RankError(AssertionError):
    def __init__(self, failures: dict[int, str]) -> None:
        self.failures = failures
        text = "\n".join(f"--- rank {r}:\n{msg}" for r, msg in sorted(failures.items()))
        super().__init__(f"{len(failures)} rank(s) failed:\n{text}")


class Cluster:
    def __init__(self, size: int, env: dict | None = None, start_timeout: float = 60.0) -> None:
        self.size = size
        ctx = mp.get_context("spawn")
        port = free_port()
        self.inboxes = [ctx.Queue() for _ in range(size)]
        self.outbox = ctx.Queue()
        self.procs = [
            ctx.Process(target=_serve, args=(r, size, port, self.inboxes[r], self.outbox, env or {}), daemon=True)
            for r in range(size)
        ]
        for p in self.procs:
            p.start()
        self.broken = False
        self._collect(start_timeout)

    def _collect(self, timeout: float) -> list:
        deadline = time.monotonic() + timeout
        results: dict[int, object] = {}
        failures: dict[int, str] = {}
        while len(results) + len(failures) < self.size:
            remaining = deadline - time.monotonic()
            dead = [r for r, p in enumerate(self.procs) if not p.is_alive() and r not in results and r not in failures]
            try:
                rank, ok, value = self.outbox.get(timeout=max(min(remaining, 0.5), 0.01))
            except queue.Empty:
                if remaining <= 0 or dead:
                    self.broken = True
                    missing = sorted(set(range(self.size)) - set(results) - set(failures))
                    why = f"ranks {dead} died" if dead else f"timed out after {timeout:.0f} s"
                    raise RankError({**failures, **{r: why for r in missing}}) from None
                continue
            (results if ok else failures)[rank] = value
        if failures:
            raise RankError(failures)
        return [results[r] for r in range(self.size)]

    def run(self, fn, *args, timeout: float = 60.0) -> list:
        """Run fn(*args) on every rank; return the per-rank results or raise RankError."""
        for inbox in self.inboxes:
            inbox.put((fn, args))
        try:
            return self._collect(timeout)
        except RankError:
            self.broken = True
            raise

    def close(self) -> None:
        if not self.broken:
            for inbox in self.inboxes:
                inbox.put(None)
            for p in self.procs:
                p.join(timeout=10)
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)
        for q in [*self.inboxes, self.outbox]:
            q.close()
            q.join_thread()

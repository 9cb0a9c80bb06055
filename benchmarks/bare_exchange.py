"""Two processes swap bytes with no library in between: what the exchange under a 2-rank call costs by itself.

    python benchmarks/bare_exchange.py [--sizes 32K,512K,2M] [--rounds 2000]

Each round, both processes hand each other `size` bytes at once, in the two
ways meshcomm's board can (board/segment.py):

  slot   copy into a shared segment, raise a flag, wait for the peer's flag,
         copy the peer's bytes out: two copies, one wait;
  readv  raise a flag, wait for the peer's, process_vm_readv its buffer,
         raise a second flag and wait for the peer's: one copy, two waits
         (only where a child may read its parent's memory);

and then copy `size` bytes within the process, as an all_to_all copies its
own block. A wait is a spin on a shared word, the cheapest there is. So a
round is the data movement of a 2-rank all_to_all of 2 x `size` bytes per
rank done in Python with nothing else: `meshcomm bench`'s time for that call
less this round is roughly what meshcomm's own work costs. Roughly: the
figures move with cache state (this reuses one segment every round, while
the board turns over 16 slots, which is faster at 128 KiB and slower at
512 KiB) and with whether the buffers sit on huge pages. The bytes received
are checked after the last round.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import time

import numpy as np

from meshcomm.bench.sizes import parse_sizes
from meshcomm.transport import cma
from meshcomm.transport.buffers import byte_view

_WAIT_SECONDS = 10.0  # a peer that has not raised its flag by then is gone
_LINE = 8  # int64 words per process in the control page: [posted, done, address]


def _wait(control: np.ndarray, index: int, value: int) -> None:
    deadline = time.monotonic() + _WAIT_SECONDS
    while control[index] < value:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the peer did not raise flag {index} to {value} within {_WAIT_SECONDS:g} s")


def exchange(me: int, peer_pid: int, shared: mmap.mmap, size: int, rounds: int, how: str) -> list[float]:
    """Run `rounds` rounds as process `me` (0 or 1); its per-round seconds."""
    control = np.frombuffer(shared, np.int64, count=2 * _LINE)
    slots = [np.frombuffer(shared, np.uint8, count=size, offset=mmap.PAGESIZE + m * size) for m in (0, 1)]
    mine, theirs = me * _LINE, (1 - me) * _LINE
    source = np.full(size, me + 1, np.uint8)
    received = np.zeros(size, np.uint8)
    own = np.zeros(size, np.uint8)
    control[mine + 2] = cma.address_of(byte_view(source))
    control[mine] = 1
    _wait(control, theirs, 1)
    peer_address = int(control[theirs + 2])
    target = byte_view(received)
    seconds = []
    for done in range(1, rounds + 1):
        flag = done + 1  # 1 said "my address is up"
        start = time.perf_counter()
        if how == "slot":
            slots[me][:] = source
            control[mine] = flag
            _wait(control, theirs, flag)
            received[:] = slots[1 - me]
        else:
            control[mine] = flag
            _wait(control, theirs, flag)
            cma.read(peer_pid, peer_address, target)
        control[mine + 1] = done
        _wait(control, theirs + 1, done)  # the peer is done with this round's bytes: both may go on
        own[:] = source
        seconds.append(time.perf_counter() - start)
    if not (received == 2 - me).all():
        raise AssertionError(f"process {me} received wrong bytes by {how}")
    return seconds


def measure(size: int, rounds: int, how: str) -> float:
    """The median round, in seconds, of two processes exchanging `size` bytes by `how`."""
    shared = mmap.mmap(-1, mmap.PAGESIZE + 2 * size)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        code = 0
        try:
            exchange(1, parent, shared, size, rounds, how)
        except BaseException as exc:  # reported by the parent: the child's status says it failed
            print(f"bare_exchange: the peer process failed: {exc}", flush=True)
            code = 1
        finally:
            os._exit(code)
    try:
        seconds = exchange(0, child, shared, size, rounds, how)
    finally:
        status = _reap(child)
    if status != 0:
        raise RuntimeError(f"the peer process of the {how} exchange exited with status {status}")
    return statistics.median(seconds[len(seconds) // 10 :])  # the first tenth warms caches and pages


def _reap(pid: int) -> int:
    """Wait for the child (killing it if it outlives the wait); its exit status."""
    deadline = time.monotonic() + _WAIT_SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.001)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="32K,512K,2M", help="bytes each process hands the other per round")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        parser.error(f"--sizes: {exc}")
    # Without the calls, or under Yama's ptrace restriction (the child cannot read its parent), only slots.
    ways = ["slot"] + (["readv"] if cma.expected_between_siblings() else [])
    print(f"# one round: both processes hand each other SIZE bytes, then copy SIZE bytes within themselves; "
          f"median of {args.rounds} rounds")
    print(f"# {'size':>9}" + "".join(f"  {how + ' us':>10}" for how in ways))
    for size in sizes:
        times = [measure(size, args.rounds, how) for how in ways]
        print(f"  {size:>9}" + "".join(f"  {seconds * 1e6:>10.1f}" for seconds in times), flush=True)


if __name__ == "__main__":
    main()

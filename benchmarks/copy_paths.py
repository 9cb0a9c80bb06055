"""How fast two ranks of this host can hand each other a block, both at once, as a 2-rank all_to_all does.

Two processes, one per core. In each round, both first run the shared-memory path (copy its block into a
shared ring, raise a flag, wait for the peer's, copy the peer's block out), then the by-reference path (read
the peer's buffer with process_vm_readv, the board's way for posts larger than a slot). The ring position
moves on every exchange, as a board's slots do, so a writer never rewrites lines its peer has just read:
by whole blocks, page-aligned (`--placement page`), or by a block and a byte, drifting through the pages'
offsets (`--placement drift`). Or it stays put (`--placement fixed`), as one staging area per rank, reused
by every call, would: the ring's lines stay in the cache. Prints medians over rounds of each round's median,
with ranges, as markdown.

    python benchmarks/copy_paths.py --sizes 256K,512K,1M,2M --rounds 5 --placement page
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

_RING = 8 << 20  # per rank
_FLAGS = 4096
_EXCHANGES = 200  # per path and round; the first 20 warm up


def _exchange_times(me: int, peer_pid: int, flags: np.ndarray, rings: list[np.ndarray], size: int,
                    placement: str) -> dict:
    """Both paths, `_EXCHANGES` times each: seconds per exchange for each step of each path."""
    peer = 1 - me
    source = np.full(size, me + 1, np.uint8)
    target = np.empty(size, np.uint8)
    flags[me * 8 + 2] = cma.address_of(memoryview(source))
    times: dict[str, list[float]] = {"copy in": [], "copy out": [], "process_vm_readv": []}
    step = 0

    def meet(word: int) -> None:  # this rank's flag up, then wait for the peer's (a bounded spin)
        flags[me * 8 + word] = step
        deadline = time.monotonic() + 10
        while flags[peer * 8 + word] < step:
            if time.monotonic() > deadline:
                raise TimeoutError("the peer process stopped answering")

    for path in ("shared memory", "by reference"):
        for _ in range(_EXCHANGES):
            step += 1
            at = {"page": (step * size) % _RING, "drift": (step * (size + 1)) % (_RING - size), "fixed": 0}[placement]
            if path == "shared memory":
                start = time.perf_counter()
                np.copyto(rings[me][at : at + size], source)
                times["copy in"].append(time.perf_counter() - start)
            meet(0)
            start = time.perf_counter()
            if path == "shared memory":
                np.copyto(target, rings[peer][at : at + size])
                times["copy out"].append(time.perf_counter() - start)
            else:
                cma.read(peer_pid, int(flags[peer * 8 + 2]), memoryview(target))
                times["process_vm_readv"].append(time.perf_counter() - start)
            meet(1)
    return {name: statistics.median(values[20:]) for name, values in times.items()}


def one_round(size: int, placement: str) -> dict:
    """One round on two fresh processes; rank 0's medians (the ranks are symmetric)."""
    shared = mmap.mmap(-1, _FLAGS + 2 * _RING)
    flags = np.frombuffer(shared, np.int64, _FLAGS // 8, 0)
    rings = [np.frombuffer(shared, np.uint8, _RING, _FLAGS + r * _RING) for r in range(2)]
    child = os.fork()
    if child == 0:
        try:
            _exchange_times(1, os.getppid(), flags, rings, size, placement)
        finally:
            os._exit(0)
    try:
        return _exchange_times(0, child, flags, rings, size, placement)
    finally:
        os.waitpid(child, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256K,512K,1M,2M", help="block sizes, K/M suffixes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--placement", choices=("page", "drift", "fixed"), default="page",
                        help="where each block lands in the ring: page-aligned, drifting a byte per exchange, or "
                             "always at its start")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    sizes = parse_sizes(args.sizes)
    for size in sizes:
        if not 0 < size <= _RING // 2 or _RING % size:
            parser.error(f"--sizes: {size} bytes does not divide the {_RING}-byte ring in two or more blocks")
    print("| block | copy in | copy out | both copies | process_vm_readv | both copies ÷ process_vm_readv |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        rounds = [one_round(size, args.placement) for _ in range(args.rounds)]

        def cell(values: list[float], scale: float = 1e6, digits: int = 1) -> str:
            low, mid, high = min(values) * scale, statistics.median(values) * scale, max(values) * scale
            return f"{mid:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"

        copy_in = [r["copy in"] for r in rounds]
        copy_out = [r["copy out"] for r in rounds]
        both = [r["copy in"] + r["copy out"] for r in rounds]
        reference = [r["process_vm_readv"] for r in rounds]
        ratio = [b / v for b, v in zip(both, reference)]
        print(f"| {size >> 10} KiB | {cell(copy_in)} | {cell(copy_out)} | {cell(both)} | {cell(reference)} | "
              f"{cell(ratio, 1, 2)} |")


if __name__ == "__main__":
    main()

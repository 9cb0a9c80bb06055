"""Ping-pong between ranks 0 and 1: one-way latency of small messages, bandwidth of large ones.

    meshcomm run -n 2 benchmarks/pingpong.py [--sizes 8,64M] [--iters 1000] [--repeats 5]

Rank 0 sends, rank 1 sends the same bytes back. One-way time is half a round
trip; each size is timed `repeats` times and the median and spread are
printed, so the noise of the machine is visible next to the figure.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import meshcomm as dist
from meshcomm.bench.sizes import parse_size


def iterations_for(nbytes: int, small_iters: int) -> int:
    # About 256 MiB moved per timing, at least 5 round trips, at most small_iters.
    return max(5, min(small_iters, (256 << 20) // max(nbytes, 1)))


def round_trips(buf: np.ndarray, iters: int) -> float:
    rank = dist.get_rank()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        if rank == 0:
            dist.send(buf, dst=1)
            dist.recv(buf, src=1)
        else:
            dist.recv(buf, src=0)
            dist.send(buf, dst=0)
    return (time.perf_counter() - start) / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,64M", help="comma-separated sizes in bytes (K/M/G suffixes)")
    parser.add_argument("--iters", type=int, default=1000, help="round trips per timing for small messages")
    parser.add_argument("--repeats", type=int, default=5, help="timings per size; the median is reported")
    args = parser.parse_args()
    dist.init_process_group()
    if dist.get_world_size() != 2:
        raise SystemExit(f"pingpong needs exactly 2 ranks, got {dist.get_world_size()}")
    if dist.get_rank() == 0:
        print(f"{'bytes':>12} {'iters':>6} {'one-way us':>11} {'min':>9} {'max':>9} {'GB/s':>8}")
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        buf = np.zeros(nbytes, dtype=np.uint8)
        iters = iterations_for(nbytes, args.iters)
        round_trips(buf, max(1, iters // 10))  # warm-up: connections, page faults
        one_way = [round_trips(buf, iters) / 2 for _ in range(args.repeats)]
        if dist.get_rank() == 0:
            median = statistics.median(one_way)
            print(f"{nbytes:>12} {iters:>6} {median * 1e6:>11.1f} {min(one_way) * 1e6:>9.1f} "
                  f"{max(one_way) * 1e6:>9.1f} {nbytes / median / 1e9:>8.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

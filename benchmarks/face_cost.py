"""What an 8-byte call costs above its lane: the face's call against the lane's compiled step alone, interleaved.

Run under the launcher, on any tree (PYTHONPATH picks it):

    meshcomm run -n 2 benchmarks/face_cost.py [--rounds 7] [--calls 20000]

Rank 0 prints, for broadcast and all_reduce of two float32s, the median (range) in µs per call over the rounds of:
`face`, dist.broadcast(a, src=0) as a user calls it; `lane`, the lane's run(a, a) called directly. Their difference
is what the face adds in front of the lane: argument binding, checks, the key and the lookup (in Python, or in a
compiled front where the tree has one).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import meshcomm as dist
from meshcomm.api.state import lanes_of
from rounds import at_least_three, spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=at_least_three, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    dist.init_process_group()
    array = np.zeros(2, np.float32)
    calls = {"broadcast": lambda: dist.broadcast(array, src=0), "all_reduce": lambda: dist.all_reduce(array)}
    keys = {"broadcast": ("broadcast", 0, None, array.dtype, array.shape),
            "all_reduce": ("all_reduce", dist.ReduceOp.SUM, array.dtype, array.shape)}
    loops = {}
    for name, call in calls.items():
        for _ in range(100):
            call()
        run = lanes_of(None)[keys[name]].run  # the lane the face's repeats run on
        loops[f"{name} face"] = _loop(call, args.calls)
        loops[f"{name} lane"] = _loop(lambda: run(array, array), args.calls)
    seconds = {label: [] for label in loops}
    for _ in range(args.rounds):
        for label, loop in loops.items():
            dist.barrier()
            start = time.perf_counter()
            loop()
            seconds[label].append((time.perf_counter() - start) / args.calls * 1e6)
    if dist.get_rank() == 0:
        print(f"| call | µs per call, median (range) of {args.rounds} rounds |\n|---|---:|")
        for label, values in seconds.items():
            print(f"| {label} | {spread(values)} |")
    dist.destroy_process_group()


def _loop(call, count: int):
    def loop() -> None:
        for _ in range(count):
            call()

    return loop


if __name__ == "__main__":
    main()

"""Extra peak memory of each rank during large all_reduce calls, against the message size.

    meshcomm run -n 2 benchmarks/peak_memory.py [--mib 64] [--calls 5]

A rank's peak resident set (VmHWM) is read before the first call, with the
message already allocated and touched, and again after the calls; the
difference is what the collective itself made resident: work arrays, ring
pages, unexpected-message buffers.
"""

from __future__ import annotations

import argparse

import numpy as np

import meshcomm as dist


def peak_resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM not found in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="message size in MiB (default 64)")
    parser.add_argument("--calls", type=int, default=5, help="all_reduce calls (default 5)")
    args = parser.parse_args()
    dist.init_process_group()
    message = np.ones((args.mib << 20) // 4, dtype=np.float32)
    dist.barrier()
    before = peak_resident_bytes()
    for _ in range(args.calls):
        dist.all_reduce(message)
    extra = peak_resident_bytes() - before
    extras = np.empty(dist.get_world_size(), dtype=np.float64)
    dist.all_gather_into_tensor(extras, np.array([extra], dtype=np.float64))
    if dist.get_rank() == 0:
        worst = extras.max() / 2**20
        print(f"all_reduce {args.mib} MiB x {args.calls} on {dist.get_world_size()} ranks: extra peak memory per rank "
              f"{', '.join(f'{e / 2**20:.1f}' for e in extras)} MiB; worst {worst:.1f} MiB = {worst / args.mib:.2f}x the message")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

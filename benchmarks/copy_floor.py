"""The least time any library can take for a large collective on this host, beside a rival's time.

A large collective on one host moves its bytes with copies: every byte a rank's output needs from another
rank is copied at least once (into shared memory and out, or once by process_vm_readv). So no library can
finish before `bytes that must cross ÷ the rate at which all the cores copy at once`. This script measures that
rate (one process per core, each copying a 64 MiB buffer that no cache holds, all at once), times the rival
with `meshcomm bench --lib`, and prints the rival's time ÷ the floor. A ratio below 2 means that no library,
meshcomm included, can be twice as fast as the rival there. Rounds interleave the two measurements.

    python benchmarks/copy_floor.py -n 4 --colls broadcast,all_gather,all_to_all --sizes 64M --lib mpich-yield
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from meshcomm.bench.sizes import parse_sizes

from rounds import at_least_three, spread

_BUFFER = 64 << 20  # larger than this machine's caches together
_COPIES = 9


def crossing_bytes(collective: str, nranks: int, size: int) -> int:
    """Bytes that must reach some rank from another, with nccl-tests' size (the larger buffer): a broadcast's
    buffer to every other rank, an all_gather's blocks of the others into every output, an all_to_all's blocks
    for the others out of every input."""
    if collective == "broadcast":
        return (nranks - 1) * size
    if collective in ("all_gather", "all_to_all"):
        return (nranks - 1) * size
    raise ValueError(f"no floor for {collective!r}: only broadcast, all_gather and all_to_all have one here")


def copy_rate(cores: int) -> float:
    """Bytes per second copied by `cores` processes at once, one per core, each its own uncached buffer."""
    read_end, write_end = os.pipe()
    children = []
    for core in range(cores):
        child = os.fork()
        if child == 0:
            os.close(read_end)
            try:
                os.sched_setaffinity(0, {core})
                source, target = np.ones(_BUFFER, np.uint8), np.zeros(_BUFFER, np.uint8)
                np.copyto(target, source)
                times = []
                for _ in range(_COPIES):
                    start = time.perf_counter()
                    np.copyto(target, source)
                    times.append(time.perf_counter() - start)
                os.write(write_end, f"{statistics.median(times)}\n".encode())
            finally:
                os._exit(0)
        children.append(child)
    os.close(write_end)
    with os.fdopen(read_end) as answers:
        seconds = [float(line) for line in answers]
    for child in children:
        os.waitpid(child, 0)
    if len(seconds) != cores:
        raise RuntimeError(f"{cores - len(seconds)} copying processes gave no time")
    return sum(_BUFFER / s for s in seconds)


def rival_times(args: argparse.Namespace) -> dict[tuple[str, int], float]:
    """µs per call of each (collective, bytes) by `args.lib`, from one `meshcomm bench` run."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "meshcomm", "bench", "-n", str(args.n), "--lib", args.lib,
                   "--sizes", args.sizes, "--json", out.name, *args.colls.split(",")]
        subprocess.run(command, check=True, timeout=args.timeout, stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in Path(out.name).read_text().splitlines() if line.strip()]
    return {(row["coll"], row["bytes"]): row["time_us"] for row in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=4, help="ranks")
    parser.add_argument("--colls", default="broadcast,all_gather,all_to_all")
    parser.add_argument("--sizes", default="64M")
    parser.add_argument("--lib", default="mpich-yield", help="the rival, as `meshcomm bench --lib` names it")
    parser.add_argument("--repeats", type=at_least_three, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes)
    collectives = args.colls.split(",")
    for collective in collectives:
        try:
            crossing_bytes(collective, args.n, 1)
        except ValueError as exc:
            parser.error(f"--colls: {exc}")
    cores = len(os.sched_getaffinity(0))
    rates: list[float] = []
    rival: dict[tuple[str, int], list[float]] = {}
    ratios: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.repeats):
        rate = copy_rate(cores)
        rates.append(rate)
        for key, micros in rival_times(args).items():
            rival.setdefault(key, []).append(micros)
            ratios.setdefault(key, []).append(micros * 1e-6 / (crossing_bytes(key[0], args.n, key[1]) / rate))
    print(f"# {args.n} ranks on {cores} cores; copy rate of all cores at once: {spread([r / 1e9 for r in rates])} GB/s;"
          f" median (range) of {args.repeats} rounds\n")
    print(f"| collective | bytes | bytes crossing | floor ms | {args.lib} ms | {args.lib} ÷ floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for collective in collectives:
        for size in sizes:
            if (collective, size) not in rival:
                continue
            crossing = crossing_bytes(collective, args.n, size)
            floors = [crossing / rate * 1e3 for rate in rates]
            print(f"| {collective} | {size} | {crossing} | {spread(floors)} | "
                  f"{spread([m / 1e3 for m in rival[(collective, size)]])} | {spread(ratios[(collective, size)])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

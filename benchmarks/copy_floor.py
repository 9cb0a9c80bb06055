"""The least time any library can take for a copy collective on this host, beside the time of libraries that do it.

Every byte that one rank's output needs from another rank's input is written into that output by some copy, after it
was read out of its own rank's memory: into shared memory and out again, or once by process_vm_readv or writev (3-4
times slower here; this kernel has no XPMEM or KNEM). So no library finishes before `bytes crossing ÷ the rate at which
all cores copy`. A byte several ranks need (a broadcast's, an all_gather's) may be read once for all of them, so for
those the rate is that of writes: copies whose source the cache holds. Each rate is that of all cores at once, measured
with one process per core, each copying between its own buffers as large as its share of the call's (every rank's
input and output): the caches hold at most what they could hold for the call itself. The floor counts no copy within
a rank, no wait and no scheduling, so it is low. A library whose time is below twice the floor cannot be beaten by 2x.
Rounds interleave the rates and the libraries' runs.

    python benchmarks/copy_floor.py -n 4 --colls broadcast,all_gather,all_to_all --sizes 64K,1M,4M,64M \
        --libs mpich-yield,meshcomm
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

_LARGEST_BUFFER = 64 << 20  # larger than this machine's caches together: beyond it the rates no longer fall
_SECONDS_PER_TIMING = 0.005  # each timing repeats the copy for about this long
_TIMINGS = 9
_CACHED_SOURCE = 256 << 10  # a source every core's cache holds


def crossing_bytes(collective: str, nranks: int, size: int) -> int:
    """Bytes that must reach some rank from another, with nccl-tests' size (the larger buffer)."""
    if collective in ("broadcast", "all_gather", "all_to_all"):
        return (nranks - 1) * size
    if collective in ("gather", "scatter"):
        return (nranks - 1) * (size // nranks)
    raise ValueError(f"no floor for {collective!r}: only broadcast, all_gather, all_to_all, gather and scatter "
                     f"have one here")


def buffer_bytes(collective: str, nranks: int, size: int) -> int:
    """Bytes of every rank's input and output together, as `meshcomm bench` lays them out."""
    if collective == "broadcast":
        return nranks * size
    if collective == "all_gather":
        return nranks * size + size
    if collective == "all_to_all":
        return 2 * nranks * size
    return 2 * size  # gather, scatter: the root's large buffer, every rank's block


def _seconds_per_copy(copy, nbytes: int) -> float:
    repeats = max(1, int(_SECONDS_PER_TIMING * 10e9 / max(nbytes, 1)))  # about 5 ms at 10 GB/s
    copy()
    timings = []
    for _ in range(_TIMINGS):
        start = time.perf_counter()
        for _ in range(repeats):
            copy()
        timings.append((time.perf_counter() - start) / repeats)
    return statistics.median(timings)


def copy_rates(cores: int, share: int) -> tuple[float, float]:
    """(Copy rate, write rate) in bytes per second of `cores` processes at once, one per core, each copying into a
    target of `share` ÷ 2 bytes from a source as large, or, for the write rate, from a _CACHED_SOURCE-byte source
    again and again."""
    half = min(max(share // 2, 4096), _LARGEST_BUFFER)
    read_end, write_end = os.pipe()
    children = []
    for core in range(cores):
        child = os.fork()
        if child == 0:
            os.close(read_end)
            try:
                os.sched_setaffinity(0, {core})
                source, target = np.ones(half, np.uint8), np.zeros(half, np.uint8)
                copying = _seconds_per_copy(lambda: np.copyto(target, source), half)
                cached = source[: min(half, _CACHED_SOURCE)]
                rows = target[: half - half % cached.size].reshape(-1, cached.size)
                writing = _seconds_per_copy(lambda: np.copyto(rows, cached), rows.size)
                os.write(write_end, f"{half / copying} {rows.size / writing}\n".encode())
            finally:
                os._exit(0)
        children.append(child)
    os.close(write_end)
    with os.fdopen(read_end) as answers:
        rates = [tuple(float(word) for word in line.split()) for line in answers]
    for child in children:
        os.waitpid(child, 0)
    if len(rates) != cores:
        raise RuntimeError(f"{cores - len(rates)} copying processes gave no time")
    return sum(rate[0] for rate in rates), sum(rate[1] for rate in rates)


def floor_seconds(collective: str, nranks: int, size: int, rates: tuple[float, float]) -> float:
    """The floor of the module docstring, at `rates` (copy_rates)."""
    copy_rate, write_rate = rates
    shared = collective in ("broadcast", "all_gather")
    return crossing_bytes(collective, nranks, size) / (write_rate if shared else copy_rate)


def library_times(lib: str, args: argparse.Namespace) -> dict[tuple[str, int], float]:
    """µs per call of each (collective, bytes) by `lib`, from one `meshcomm bench --lib` run."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "meshcomm", "bench", "-n", str(args.n), "--lib", lib,
                   "--sizes", args.sizes, "--json", out.name, *args.colls.split(",")]
        subprocess.run(command, check=True, timeout=args.timeout, stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in Path(out.name).read_text().splitlines() if line.strip()]
    return {(row["coll"], row["bytes"]): row["time_us"] for row in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=4, help="ranks")
    parser.add_argument("--colls", default="broadcast,all_gather,all_to_all")
    parser.add_argument("--sizes", default="64M")
    parser.add_argument("--libs", default="mpich-yield",
                        help="libraries to time beside the floor, comma-separated, as `meshcomm bench --lib` names "
                             "them")
    parser.add_argument("--repeats", type=at_least_three, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes)
    collectives = args.colls.split(",")
    libs = args.libs.split(",")
    for collective in collectives:
        try:
            crossing_bytes(collective, args.n, 1)
        except ValueError as exc:
            parser.error(f"--colls: {exc}")
    cores = len(os.sched_getaffinity(0))
    keys = [(collective, size) for collective in collectives for size in sizes]
    rates: dict[tuple[str, int], list[tuple[float, float]]] = {key: [] for key in keys}
    floors: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
    times = {lib: {key: [] for key in keys} for lib in libs}
    ratios = {lib: {key: [] for key in keys} for lib in libs}
    for _ in range(args.repeats):
        by_share: dict[int, tuple[float, float]] = {}
        for key in keys:
            share = buffer_bytes(key[0], args.n, key[1]) // cores
            if share not in by_share:
                by_share[share] = copy_rates(cores, share)
            rates[key].append(by_share[share])
            floors[key].append(floor_seconds(key[0], args.n, key[1], by_share[share]) * 1e6)
        for lib in libs:
            for key, micros in library_times(lib, args).items():
                if key in times[lib]:
                    times[lib][key].append(micros)
                    ratios[lib][key].append(micros / floors[key][-1])
    print(f"# {args.n} ranks on {cores} cores; rates of all cores at once, GB/s; median (range) of {args.repeats} "
          f"rounds\n")
    print("| collective | bytes | copy GB/s | write GB/s | floor µs | "
          + " | ".join(f"{lib} µs | {lib} ÷ floor" for lib in libs) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|---:|" * len(libs))
    for key in keys:
        if not all(times[lib][key] for lib in libs):
            continue
        cells = [spread([r[which] / 1e9 for r in rates[key]]) for which in range(2)] + [spread(floors[key])]
        for lib in libs:
            cells += [spread(times[lib][key]), spread(ratios[lib][key])]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

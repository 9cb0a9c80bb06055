"""`ray.util.collective.allreduce` between Ray actors on one node: Ray's gloo backend against meshcomm's.

    python benchmarks/ray_compare.py [--actors 2,4] [--sizes 8,1M,64M] [--repeats 3] [--out FILE]

Each repeat starts fresh actors for each (actor count, backend), interleaved
(gloo, meshcomm, gloo, ...), since Ray's gloo backend sets up
torch.distributed once per process. Inside every actor, a call is timed
alone, after warm-up calls and a barrier; an actor count's time at a size is
the slowest actor's median. It prints, per point, the median over repeats
and the range, and the ratio gloo ÷ meshcomm (above 1: meshcomm is faster).
Ray runs on this host only, on loopback. Needs ray and torch (Ray's gloo
backend is torch's).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import ray
from ray.util import collective

import meshcomm.ray

_CALLS = {8: 300, 1 << 20: 60, 64 << 20: 8}


def _parse_size(text: str) -> int:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * scale[text[-1]] if text[-1] in scale else int(text)


@ray.remote(num_cpus=0)
class Timer:
    def time_allreduce(self, group: str, sizes: list[int]) -> dict[int, float]:
        medians = {}
        for size in sizes:
            array = np.ones(max(size // 4, 1), dtype=np.float32)
            calls = _CALLS.get(size, 20)
            for _ in range(3):
                collective.allreduce(array, group_name=group)
            collective.barrier(group_name=group)
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                collective.allreduce(array, group_name=group)
                times.append(time.perf_counter() - start)
            medians[size] = statistics.median(times)
        return medians


def run(backend: str, actors: int, sizes: list[int], name: str) -> dict[int, float]:
    timers = [Timer.remote() for _ in range(actors)]
    if backend == "meshcomm":
        meshcomm.ray.create_group(timers, group_name=name)
    else:
        collective.create_collective_group(timers, actors, list(range(actors)), backend="gloo", group_name=name)
    per_actor = ray.get([t.time_allreduce.remote(name, sizes) for t in timers], timeout=1200)
    if backend == "meshcomm":
        meshcomm.ray.destroy_group(timers, name)
    for timer in timers:
        ray.kill(timer)
    return {size: max(result[size] for result in per_actor) for size in sizes}


def _show(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", default="2,4")
    parser.add_argument("--sizes", default="8,1M,64M")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    args = parser.parse_args()
    counts = [int(a) for a in args.actors.split(",")]
    sizes = [_parse_size(s) for s in args.sizes.split(",")]
    if min(counts) < 2 or args.repeats < 1:
        parser.error("--actors needs counts of 2 or more, --repeats at least 1")
    ray.init(num_cpus=max(counts), include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    meshcomm.ray.register()
    results: dict[tuple[str, int, int], list[float]] = {}
    serial = 0
    for repeat in range(args.repeats):
        for actors in counts:
            for backend in ("gloo", "meshcomm"):
                serial += 1
                for size, seconds in run(backend, actors, sizes, f"bench-{serial}").items():
                    results.setdefault((backend, actors, size), []).append(seconds)
        print(f"repeat {repeat + 1} of {args.repeats} done", flush=True)
    lines = ["| actors | size | gloo median (range) | meshcomm median (range) | gloo ÷ meshcomm median (range) |",
             "|---|---|---|---|---|"]
    for actors in counts:
        for size in sizes:
            gloo, mesh = results["gloo", actors, size], results["meshcomm", actors, size]
            ratios = [g / m for g, m in zip(gloo, mesh)]
            lines.append(f"| {actors} | {size} B | {_show(statistics.median(gloo))} ({_show(min(gloo))}–"
                         f"{_show(max(gloo))}) | {_show(statistics.median(mesh))} ({_show(min(mesh))}–"
                         f"{_show(max(mesh))}) | {statistics.median(ratios):.1f}x ({min(ratios):.1f}–"
                         f"{max(ratios):.1f}) |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as out:
            out.write(table + "\n")
    ray.shutdown()


if __name__ == "__main__":
    main()

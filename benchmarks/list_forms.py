"""The forms that take lists beside the forms that take one tensor, and beside an earlier meshcomm tree. Run by
itself; it starts its ranks.

    python benchmarks/list_forms.py --before /tmp/before --rounds 5 --bytes 8

Each job times every call in alternating blocks; rounds alternate the trees. A list is the chunks of one array
(`--apart` makes each block its own array). Prints medians with ranges over rounds, per call and tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from rounds import alternating_blocks, at_least_three, job_result, spread

BLOCKS = 6  # of each call, alternating, in one job


def _rank_job(nbytes: int, apart: bool, iters: int) -> None:
    import numpy as np

    import meshcomm as dist

    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    count = max(1, nbytes // 4)
    mine = np.ones(count, np.float32)
    whole = np.zeros(count * n, np.float32)

    def blocks():
        return [np.zeros(count, np.float32) for _ in range(n)] if apart else list(np.split(whole, n))

    listed, from_list = blocks(), blocks()
    root_list = listed if rank == 0 else None
    out = np.zeros(count, np.float32)
    calls = {
        "all_gather (list)": lambda: dist.all_gather(listed, mine),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(whole, mine),
        "reduce_scatter (list)": lambda: dist.reduce_scatter(out, from_list),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(out, whole),
        "gather (list)": lambda: dist.gather(mine, root_list, dst=0),
        "scatter (list)": lambda: dist.scatter(out, root_list, src=0),
    }
    seconds = alternating_blocks(calls, iters, BLOCKS, dist.barrier)
    slowest = np.empty(n, np.float64)
    result = {}
    for name, values in seconds.items():
        dist.all_gather_into_tensor(slowest, np.array([statistics.median(values)]))
        result[name] = float(slowest.max()) * 1e6
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def _launch(tree: str, nranks: int, nbytes: int, apart: bool, iters: int) -> dict[str, float]:
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), os.path.abspath(__file__), "--rank-job",
               str(nbytes), str(int(apart)), str(iters)]
    return job_result(command, tree, cwd=tree, env={**os.environ, "PYTHONPATH": tree})


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--rank-job":
        _rank_job(int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="an earlier meshcomm tree (a git worktree)")
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--bytes", type=int, default=8, help="each rank's block")
    parser.add_argument("--apart", action="store_true", help="each block its own array")
    parser.add_argument("--rounds", type=at_least_three, default=3)
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    now = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"before": os.path.abspath(args.before), "now": now}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_number in range(args.rounds):
        for name in (trees if round_number % 2 == 0 else reversed(trees)):
            runs[name].append(_launch(trees[name], args.n, args.bytes, args.apart, args.iters))
    print(f"# {args.n} ranks, {args.bytes} B per rank{', blocks apart' if args.apart else ''}; µs per call "
          f"(the slowest rank's median of {BLOCKS} blocks), median (range) of {args.rounds} rounds\n")
    print("| call | before µs | now µs | now ÷ before |\n|---|---:|---:|---:|")
    for call in runs["now"][0]:
        before = [run[call] for run in runs["before"]]
        now_values = [run[call] for run in runs["now"]]
        ratios = [a / b for a, b in zip(now_values, before)]
        print(f"| {call} | {spread(before)} | {spread(now_values)} | {spread(ratios)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

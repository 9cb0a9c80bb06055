"""Collectives across several "hosts" on one machine: network namespaces, a rate-limited link between them.

    sudo python benchmarks/multihost.py --hosts 2 --ranks-per-host 2 --rate 1gbit \
        --coll all_reduce --sizes 8,64K,1M,16M --algos ring,rabenseifner,double_binary_tree

Builds the namespaces of tests/multihost/netns.py (a bridge, one veth per
host, `tc tbf` at --rate on each host's interface), runs `meshcomm bench`'s
worker once per algorithm as one job across the hosts (one `meshcomm run`
per host, --nnodes/--node-rank/--host-id), and prints the median time of each
algorithm at each size, slowest rank per call, with the best marked. Needs
root and iproute2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from meshcomm.bench.sizes import parse_sizes  # noqa: E402
from meshcomm.bench.worker import Spec  # noqa: E402
from tests.multihost.job import run_job  # noqa: E402
from tests.multihost.netns import Network, unavailable  # noqa: E402


def measure(net: Network, ranks_per_host: int, coll: str, algo: str, sizes: list[int]) -> dict[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.jsonl")
        spec = Spec(colls=[coll], sizes=sizes, algos={coll: algo}, json=out, budget=0.5)
        runs = run_job(net, ranks_per_host, ["-m", "meshcomm.bench.worker", spec.to_json()], timeout=600)
        for run in runs:
            if run.returncode != 0:
                raise SystemExit(f"{algo}: host {run.host} failed ({run.returncode}):\n{run.output[-2000:]}")
        with open(out) as rows:
            return {row["bytes"]: row["time_us"] for row in map(json.loads, rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--rate", default="1gbit", help="tc rate of each host's link, e.g. 1gbit, 100mbit; 'none'")
    parser.add_argument("--coll", default="all_reduce")
    parser.add_argument("--sizes", default="8,64K,1M,16M")
    parser.add_argument("--algos", required=True, help="comma-separated meshcomm algorithm names")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(f"multihost benchmark: {reason}")
    sizes = parse_sizes(args.sizes)
    algos = args.algos.split(",")
    rate = None if args.rate == "none" else args.rate
    with Network(args.hosts, rate=rate) as net:
        times = {algo: measure(net, args.ranks_per_host, args.coll, algo, sizes) for algo in algos}
    print(f"{args.coll}, {args.hosts} hosts x {args.ranks_per_host} ranks, link {args.rate}; median µs per call")
    print(f"{'bytes':>10} " + " ".join(f"{a:>20}" for a in algos))
    for size in sizes:
        row = {a: times[a].get(size) for a in algos}
        best = min((t for t in row.values() if t is not None), default=None)
        cells = [f"{'-' if t is None else f'{t:.0f}' + ('*' if t == best else ' '):>20}" for t in row.values()]
        print(f"{size:>10} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Collectives across several "hosts" on one machine: network namespaces, a rate-limited link between them.

    sudo python benchmarks/multihost.py --hosts 2 --ranks-per-host 2 --rate 1gbit \
        --coll all_reduce --sizes 8,64K,1M,16M --algos auto,ring,rabenseifner,hierarchical

Builds the namespaces of tests/multihost/netns.py (a bridge, one veth per
host, `tc tbf` at --rate on each host's interface), runs `meshcomm bench`'s
worker once per algorithm as one job across the hosts (one `meshcomm run`
per host, --nnodes/--node-rank/--host-id), and prints the median time of each
algorithm at each size, slowest rank per call, with the best marked. `auto`
names no algorithm, so the group's cost model chooses, as in a user's job;
first a ping-pong between two hosts measures the link's α and β, as
`meshcomm tune` measures its "other_host" class, and the auto job runs with
them (MESHCOMM_TUNING or the built-in defaults for everything else).
With a --rate, the link bound of the collective follows: the bytes each host
must put on its link, at the link's rate (tc limits what a host sends), and
each algorithm's time over it. Needs root and iproute2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from meshcomm.bench.sizes import parse_sizes  # noqa: E402
from meshcomm.bench.worker import Spec  # noqa: E402
from meshcomm.tuner import measure as tuner_measure, model  # noqa: E402
from tests.multihost.job import run_job  # noqa: E402
from tests.multihost.netns import Network, unavailable  # noqa: E402


AUTO = "auto"

# The least share of the payload each host must send to the others, whatever the algorithm:
# all_reduce: every host's data reaches every other host and the results come back
# (2(H-1)/H, as the hierarchical ring achieves); all_gather and reduce_scatter: the
# H-1 parts other hosts hold or need; broadcast: the root's host sends it all once.
LINK_SHARE = {
    "all_reduce": lambda hosts: 2 * (hosts - 1) / hosts,
    "all_gather": lambda hosts: (hosts - 1) / hosts,
    "reduce_scatter": lambda hosts: (hosts - 1) / hosts,
    "broadcast": lambda hosts: 1.0,
}
_TC_BITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}  # tc's SI prefixes of "bit" (bits per second)


def rate_bytes_per_second(rate: str) -> float:
    """tc's rate spelling (500kbit, 100mbit, 1gbit) in bytes per second."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate.strip().lower())
    if not match:
        raise ValueError(f"--rate must be a number of bits per second such as 1gbit or 100mbit, got {rate!r}")
    return float(match.group(1)) * _TC_BITS[match.group(2)] / 8


def link_share(coll: str, hosts: int) -> float | None:
    """The share of the payload each host must send (LINK_SHARE); None where not defined or on one host."""
    share = LINK_SHARE.get(coll)
    return None if share is None or hosts < 2 else share(hosts)


def bench_rows(net: Network, ranks_per_host: int, spec: Spec, label: str,
               env: dict[str, str] | None = None) -> list[dict]:
    """Run `meshcomm bench`'s worker as one job across the hosts; its JSON rows."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = replace(spec, json=os.path.join(tmp, "rows.jsonl"))
        runs = run_job(net, ranks_per_host, ["-m", "meshcomm.bench.worker", spec.to_json()], timeout=600, env=env)
        for run in runs:
            if run.returncode != 0:
                raise SystemExit(f"{label}: host {run.host} failed ({run.returncode}):\n{run.output[-2000:]}")
        with open(spec.json) as rows:
            return [json.loads(row) for row in rows]


def measured_link(net: Network) -> model.Link:
    """The links' α and β from a ping-pong between ranks on two hosts."""
    spec = Spec(colls=["pingpong"], sizes=list(tuner_measure.PINGPONG_BYTES), budget=0.5)
    return tuner_measure.fit_link(tuner_measure.one_way_times(bench_rows(net, 1, spec, "ping-pong")))


def measure(net: Network, ranks_per_host: int, coll: str, algo: str, sizes: list[int],
            env: dict[str, str] | None = None) -> dict[int, float]:
    algos = {} if algo == AUTO else {coll: algo}
    spec = Spec(colls=[coll], sizes=sizes, algos=algos, budget=0.5)
    return {row["bytes"]: row["time_us"] for row in bench_rows(net, ranks_per_host, spec, algo, env)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--rate", default="1gbit", help="tc rate of each host's link, e.g. 1gbit, 100mbit; 'none'")
    parser.add_argument("--coll", default="all_reduce")
    parser.add_argument("--sizes", default="8,64K,1M,16M")
    parser.add_argument("--algos", required=True,
                        help=f"comma-separated meshcomm algorithm names; {AUTO!r}: the cost model chooses")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(f"multihost benchmark: {reason}")
    sizes = parse_sizes(args.sizes)
    algos = args.algos.split(",")
    rate = None if args.rate == "none" else args.rate
    try:
        bytes_per_second = None if rate is None else rate_bytes_per_second(rate)
    except ValueError as exc:
        parser.error(str(exc))
    with Network(args.hosts, rate=rate) as net, tempfile.TemporaryDirectory() as tmp:
        auto_env = None
        if AUTO in algos:
            link = measured_link(net)
            print(f"link measured across hosts: alpha {link.alpha * 1e6:.1f} µs, beta {link.beta * 1e9:.3f} ns/B "
                  f"({1e-9 / link.beta if link.beta else float('inf'):.3f} GB/s); {AUTO!r} uses it")
            tuning = os.path.join(tmp, "tuning.json")
            model.save(replace(model.configured(), other_host=link), tuning)
            auto_env = {"MESHCOMM_TUNING": tuning}
        times = {algo: measure(net, args.ranks_per_host, args.coll, algo, sizes, auto_env if algo == AUTO else None)
                 for algo in algos}
    print(f"{args.coll}, {args.hosts} hosts x {args.ranks_per_host} ranks, link {args.rate}; median µs per call")
    print(f"{'bytes':>10} " + " ".join(f"{a:>20}" for a in algos))
    for size in sizes:
        row = {a: times[a].get(size) for a in algos}
        best = min((t for t in row.values() if t is not None), default=None)
        cells = [f"{'-' if t is None else f'{t:.0f}' + ('*' if t == best else ' '):>20}" for t in row.values()]
        print(f"{size:>10} " + " ".join(cells))
    share = link_share(args.coll, args.hosts)
    if bytes_per_second is not None and share is not None:
        print(f"time over the link bound ({share:.2f} x bytes per host at {rate})")
        for size in sizes:
            bound = share * size / bytes_per_second * 1e6
            cells = [f"{'-' if times[a].get(size) is None else f'{times[a][size] / bound:.2f}':>20}" for a in algos]
            print(f"{size:>10} " + " ".join(cells) + f"   (bound {bound:.0f} µs)")
    if AUTO in algos and "ring" in algos:
        ratios = [f"{size} B {times[AUTO][size] / times['ring'][size]:.2f}" for size in sizes
                  if size in times[AUTO] and size in times["ring"]]
        print(f"auto / ring: {', '.join(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

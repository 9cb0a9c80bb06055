"""The comparison the project reports: meshcomm beside torch's gloo and MPICH, printed as markdown.

    python benchmarks/compare.py [--ranks 2,4,8] [--sizes 8:64M] [--libs gloo,mpich,mpich-yield] [--json all.jsonl]

For each rank count it runs what `meshcomm bench --compare` runs (all_reduce,
broadcast, all_gather, reduce_scatter, all_to_all; libraries interleaved
round by round), then a ping-pong between two ranks of every library: one-way
latency of 8 bytes and bandwidth of 64 MiB. A library that is not installed
is skipped with the command that installs it. Expect tens of minutes for the
full run on a small machine: eight ranks on two cores are slow for everyone.
"""

from __future__ import annotations

import argparse
import os
import sys

from meshcomm.bench import report, runner
from meshcomm.bench.sizes import parse_sizes

COLLS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"]
PINGPONG_SIZES = [8, 64 << 20]


def pingpong_table(records: list[dict]) -> list[str]:
    lines = ["**ping-pong, 2 ranks: one-way time of 8 B, bandwidth of 64 MiB**", "",
             "| library | 8 B latency (us) | 64 MiB bandwidth (GB/s) |", "|---|---:|---:|"]
    for lib in dict.fromkeys(r["lib"] for r in records):
        found = {r["bytes"]: r for r in records if r["lib"] == lib}
        small, large = found.get(PINGPONG_SIZES[0]), found.get(PINGPONG_SIZES[1])
        latency = report.format_time(small["time_us"]) if small else "-"
        bandwidth = f"{large['algbw_GBps']:.2f}" if large else "-"
        lines.append(f"| {lib} | {latency} | {bandwidth} |")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts (default 2,4,8)")
    parser.add_argument("--sizes", default="8:64M", help="sizes of the collectives (default 8:64M)")
    parser.add_argument("--libs", default="gloo,mpich,mpich-yield", help="libraries beside meshcomm")
    parser.add_argument("--json", default=None, help="also write every row as JSON lines to this file")
    args = parser.parse_args()
    ranks = [int(n) for n in args.ranks.split(",")]
    libs = ["meshcomm", *(lib for lib in args.libs.split(",") if lib and lib != "meshcomm")]
    sizes = parse_sizes(args.sizes)

    print(f"# meshcomm compared with {', '.join(libs[1:])} on {os.cpu_count()} cores\n")
    records: list[dict] = []
    failed = False
    for nproc in ranks:
        print(f"## {nproc} ranks\n", flush=True)
        code, found = runner.compare(runner.Plan(nproc=nproc, colls=COLLS, sizes=sizes, libs=libs), markdown=True)
        records += found
        failed |= code != 0
    print("## ping-pong\n", flush=True)
    with open(os.devnull, "w") as quiet:  # this one gets its own table below
        code, found = runner.compare(runner.Plan(nproc=2, colls=["pingpong"], sizes=PINGPONG_SIZES, libs=libs),
                                     out=quiet, markdown=True)
    records += found
    failed |= code != 0
    print("\n".join(pingpong_table(found)), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            report.write_json_lines(records, f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

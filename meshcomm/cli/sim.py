"""`meshcomm sim`: predicted time, algbw and busbw of each algorithm, from the cost model, at any scale."""

from __future__ import annotations

import argparse
import json
import sys
import time

from meshcomm.cli import argtypes
from meshcomm.cli.main import UsageError


def _int_list(text: str) -> list[int]:
    try:
        values = [argtypes.positive_int(part) for part in text.split(",") if part.strip()]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"must name at least one rank count, got {text!r}")
    return values


def _sizes(text: str) -> list[int]:
    from meshcomm.bench.sizes import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.allow_abbrev = False
    parser.add_argument("collective", nargs="?", default=None, metavar="COLLECTIVE",
                        help="the collective (default all_reduce)")
    parser.add_argument("--coll", default=None, metavar="C",
                        help="the same as COLLECTIVE, as an option (the older spelling); not both")
    parser.add_argument("--algos", default=None, metavar="A1,A2",
                        help="algorithms to compare (default: every algorithm of the collective)")
    parser.add_argument("-n", "--ranks", type=_int_list, default=[2, 4, 8], metavar="N1,N2",
                        help="rank counts, e.g. 6,96,1536,24576 (default 2,4,8)")
    parser.add_argument("--sizes", type=_sizes, default=[8, 1 << 20], metavar="S1,S2",
                        help="message sizes as in meshcomm bench, e.g. 8,64K,1M or 8:64M (default 8,1M)")
    parser.add_argument("--topology", default="here", metavar="NAME",
                        help="here (this machine as `meshcomm tune` measured it), summit or dgx-a100")
    parser.add_argument("--ranks-per-host", type=argtypes.positive_int, default=None, metavar="K",
                        help="ranks on each host (default: the topology's; here: all ranks on one host)")
    parser.add_argument("--itemsize", type=argtypes.positive_int, default=4, help="bytes per element (default 4)")
    parser.add_argument("--exact", action="store_true",
                        help="replay rings rank by rank at every size instead of their closed form above 1024 ranks")
    parser.add_argument("--json", metavar="FILE", default=None, help="append one JSON line per point to FILE")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="time against ranks, one line per algorithm and size (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    from meshcomm.algorithms import ALGORITHMS
    from meshcomm.bench.sizes import bus_factor, human_bytes
    from meshcomm.sim import simulate
    from meshcomm.sim.topology import UnknownTopology, topology

    if args.collective is not None and args.coll is not None:
        raise UsageError("argument --coll: not allowed with argument COLLECTIVE (name the collective once)")
    spelling = "--coll" if args.coll is not None else "COLLECTIVE"
    args.coll = args.coll or args.collective or "all_reduce"
    if args.coll not in ALGORITHMS:
        raise UsageError(f"argument {spelling}: unknown collective {args.coll!r}; "
                         f"choose one of: {', '.join(ALGORITHMS)}")
    known = ALGORITHMS[args.coll]
    algos = list(known) if args.algos is None else [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in known]
    if unknown or not algos:
        raise UsageError(f"argument --algos: {args.coll} has no algorithm {', '.join(unknown) or '(none given)'}; "
                         f"choose from: {', '.join(known)}")
    try:
        topo = topology(args.topology, args.ranks_per_host)
    except UnknownTopology as exc:
        raise UsageError(f"argument --topology: {exc}") from None
    except ValueError as exc:  # a MESHCOMM_ setting that `here` reads, not an argument
        raise UsageError(str(exc)) from None
    if args.plot:
        from meshcomm.explain import png

        if not png.available():
            raise UsageError(png.MISSING)
    started = time.perf_counter()
    rows = []
    print(f"# {args.coll} on {topo.name} ({topo.ranks_per_host or 'all'} ranks per host; "
          f"parameters: {topo.parameters.source}); predicted µs per call, * = fastest")
    ratio = len(algos) == 2  # two algorithms: also the first's time over the second's
    print(f"# {'ranks':>6} {'size':>9} " + " ".join(f"{a:>22}" for a in algos)
          + (f" {algos[0] + '/' + algos[1]:>12}" if ratio else ""))
    for n in args.ranks:
        for nbytes in args.sizes:
            times = {}
            for algo in algos:
                prediction = simulate(args.coll, algo, n, nbytes, topo, args.itemsize, exact=args.exact)
                times[algo] = prediction.seconds
                algbw = nbytes / prediction.seconds / 1e9 if prediction.seconds else 0.0
                rows.append({"coll": args.coll, "algorithm": algo, "ranks": n, "bytes": nbytes,
                             "topology": topo.name, "time_us": prediction.seconds * 1e6, "algbw_GBps": algbw,
                             "busbw_GBps": algbw * bus_factor(args.coll, n) if n > 1 else 0.0,
                             "method": prediction.method})
            best = min(times.values())
            cells = [f"{t * 1e6:>21.1f}{'*' if t == best else ' '}" for t in times.values()]
            if ratio:
                first, second = times.values()
                cells.append(f"{first / second:>12.1f}" if second else f"{'-':>12}")
            print(f"  {n:>6} {human_bytes(nbytes):>9} " + " ".join(cells))
    print(f"# simulated in {time.perf_counter() - started:.1f} s")
    if args.json:
        with open(args.json, "a", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
    if args.plot:
        _plot(rows, args.plot, f"{args.coll} on {topo.name}")
        print(f"# wrote {args.plot}", file=sys.stderr)
    return 0


def _plot(rows: list[dict], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meshcomm.bench.sizes import human_bytes

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in dict.fromkeys((r["algorithm"], r["bytes"]) for r in rows):
        points = sorted((r["ranks"], r["time_us"]) for r in rows if (r["algorithm"], r["bytes"]) == key)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{key[0]}, {human_bytes(key[1])}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel("predicted time per call (µs)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

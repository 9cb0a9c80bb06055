"""`meshcomm bench`: nccl-tests-style tables for meshcomm's collectives, alone or beside gloo and MPICH."""

from __future__ import annotations

import argparse
import sys

from meshcomm.cli import argtypes
from meshcomm.cli.main import UsageError


def _sizes(text: str) -> list[int]:
    from meshcomm.bench.sizes import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(choices: tuple[str, ...]):
    def convert(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {', '.join(choices)}; got {text!r}")
        return list(dict.fromkeys(names))

    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from meshcomm.bench.data import DTYPES, OPS
    from meshcomm.bench.libs import LIBS
    from meshcomm.bench.sizes import COLLECTIVES

    parser.allow_abbrev = False
    parser.add_argument("-n", "--nproc-per-node", dest="nproc", type=argtypes.positive_int, default=2, metavar="N",
                        help="ranks on this host (default 2)")
    parser.add_argument("collectives", nargs="*", type=_names(COLLECTIVES), default=[], metavar="COLLECTIVE",
                        help="collectives to time, comma- and/or space-separated (default all_reduce): "
                             f"{', '.join(COLLECTIVES)}")
    parser.add_argument("--colls", type=_names(COLLECTIVES), default=None, metavar="C1,C2",
                        help="the same as COLLECTIVE, as an option (the older spelling); not both")
    parser.add_argument("--sizes", type=_sizes, default="8:64M", metavar="MIN:MAX | S1,S2",
                        help="message sizes in bytes, K/M/G suffixes: MIN:MAX doubles from MIN to MAX, "
                             "or a comma list (default 8:64M); the size is nccl-tests' (the larger buffer)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="element type (default float32)")
    parser.add_argument("--op", choices=OPS, default="sum", help="reduction of reducing collectives (default sum)")
    parser.add_argument("--root", type=argtypes.non_negative_int, default=0,
                        help="root of rooted collectives (default 0)")
    parser.add_argument("--algo", default=None, metavar="NAME | COLL:NAME,...",
                        help="meshcomm algorithm, passed as algorithm=: NAME for every chosen collective that has "
                             "it, or per collective (all_reduce:ring,broadcast:chain); default: meshcomm's choice")
    parser.add_argument("--iters", type=argtypes.positive_int, default=None,
                        help="timed calls per size (default: adapts to size, 5 to 1000, about 1 s per size)")
    parser.add_argument("--warmup", type=argtypes.non_negative_int, default=None,
                        help="untimed calls per size before timing (default 2 to 20 by size)")
    parser.add_argument("--check", action="store_true",
                        help="check one more call against the expected values; the #wrong column counts bad elements")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="write one JSON line per (library, collective, size) row")
    parser.add_argument("--plot", metavar="FILE.png", default=None, help="plot busbw against size (needs matplotlib)")
    parser.add_argument("--lib", choices=LIBS, default="meshcomm",
                        help="library to time without --compare (default meshcomm)")
    parser.add_argument("--compare", type=_names(LIBS), default=None, metavar="gloo,mpich,mpich-yield",
                        help="also time these libraries, interleaved round by round, and print a side-by-side table")
    parser.add_argument("--markdown", action="store_true", help="print the --compare tables as markdown")
    parser.add_argument("--timeout", type=argtypes.positive_seconds, default=None,
                        help="deadline in seconds for every blocking operation of meshcomm and gloo ranks")
    parser.epilog = ("Times are the median over calls of the slowest rank's time; algbw = size / time and busbw = "
                     "algbw x nccl-tests' bus factor (all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, "
                     "broadcast and reduce 1). MPICH runs under mpiexec; meshcomm and gloo under meshcomm run.")


def collectives(args: argparse.Namespace) -> list[str]:
    """The collectives given as COLLECTIVE words or with --colls (not both); all_reduce if neither."""
    if args.collectives and args.colls is not None:
        raise UsageError("argument --colls: not allowed with argument COLLECTIVE (name the collectives once)")
    chosen = [name for names in args.collectives for name in names] or args.colls or ["all_reduce"]
    return list(dict.fromkeys(chosen))


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from meshcomm.bench import report, runner

    args.colls = collectives(args)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise UsageError(report.VIZ_HINT)
    if args.root >= args.nproc:
        raise UsageError(f"--root must be in [0, {args.nproc}) for -n {args.nproc}, got {args.root}")
    try:
        algos = runner.algorithms_for(args.algo, args.colls)
        libs = [args.lib] if args.compare is None else ["meshcomm", *(x for x in args.compare if x != "meshcomm")]
        plan = runner.Plan(nproc=args.nproc, colls=args.colls, sizes=args.sizes, libs=libs, dtype=args.dtype,
                           op=args.op, root=args.root, algos=algos, iters=args.iters, warmup=args.warmup,
                           check=args.check, timeout=args.timeout)
        if args.compare is None:
            reason = runner.missing(args.lib)
            if reason is not None:
                print(f"meshcomm bench: cannot run {args.lib}: {reason}", file=sys.stderr)
                return 1
            code, records = runner.sweep(plan)
        else:
            code, records = runner.compare(plan, markdown=args.markdown)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            report.write_json_lines(records, f)
    if args.plot and records:
        report.plot(records, args.plot)
    return code

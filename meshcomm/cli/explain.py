"""`meshcomm explain`: draw a collective's algorithm step by step, as text, SVG, PNG or an HTML page."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from meshcomm.cli import argtypes
from meshcomm.cli.main import UsageError

# Beyond these a drawing stops being readable and the symbolic run (one bit per
# element of every rank) stops being instant; neither limit exists for running.
MAX_RANKS = 64
MAX_COUNT = 4096
_SUFFIXES = {".txt": "text", ".svg": "svg", ".png": "png", ".html": "html", ".htm": "html"}


def _nranks(text: str) -> int:
    return argtypes.integer(text, minimum=1, maximum=MAX_RANKS)


def _count(text: str) -> int:
    return argtypes.integer(text, minimum=1, maximum=MAX_COUNT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.allow_abbrev = False
    parser.add_argument("collective", metavar="COLLECTIVE",
                        help="all_reduce, broadcast, reduce, all_gather, reduce_scatter, gather, scatter, all_to_all, "
                             "barrier, scan or exscan")
    parser.add_argument("--algo", default=None, metavar="NAME",
                        help="algorithm of that collective (default: the one meshcomm picks by default)")
    parser.add_argument("-n", "--nranks", type=_nranks, default=4, metavar="N",
                        help=f"number of ranks, 1 to {MAX_RANKS} (default 4)")
    parser.add_argument("--count", type=_count, default=None, metavar="C",
                        help="elements of the buffer (broadcast, reduce, all_reduce, scan, exscan; default N), of "
                             "each rank's block (all_gather, gather, reduce_scatter, scatter; default 1) or of each "
                             f"pair's block (all_to_all; default 1); at most {MAX_COUNT}")
    parser.add_argument("--root", type=argtypes.non_negative_int, default=None, metavar="R",
                        help="root of broadcast, reduce, gather and scatter (default 0)")
    parser.add_argument("--ranks-per-host", type=_nranks, default=None, metavar="K",
                        help="put ranks 0..K-1 on host 0, the next K on host 1, ... (what node-aware algorithms "
                             "such as all_reduce's hierarchical see; default: one host)")
    parser.add_argument("--dtype", default="float32", metavar="DTYPE",
                        help="element type for the byte counts of the cost summary (default float32)")
    parser.add_argument("--format", choices=("text", "svg", "png", "html"), default=None,
                        help="text for terminals, svg or png pictures, or an html page with a step slider "
                             "(default: from -o's suffix, else text)")
    parser.add_argument("-o", "--output", metavar="FILE", default=None, help="write to FILE instead of stdout")
    parser.epilog = ("Drawn from the same schedules the executor runs, stepped through by the symbolic checker: "
                     "each chunk shows whose contributions it holds (0+1+2 = ranks 0, 1 and 2 reduced). Text is "
                     "coloured when stdout is a terminal and NO_COLOR is unset. png needs matplotlib.")


def run(args: argparse.Namespace) -> int:
    from meshcomm.algorithms import ALGORITHMS
    from meshcomm.algorithms.problem import ROOTED
    from meshcomm.explain import build_trace, make_problem, render
    from meshcomm.explain.model import DTYPES

    collective = args.collective
    if collective not in ALGORITHMS:
        choices = ", ".join(ALGORITHMS)
        raise UsageError(f"argument COLLECTIVE: unknown collective {collective!r}; choose one of: {choices}")
    algorithms = ALGORITHMS[collective]
    if args.algo is not None and args.algo not in algorithms:
        choices = ", ".join(algorithms)
        raise UsageError(f"argument --algo: unknown {collective} algorithm {args.algo!r}; choose one of: {choices}")
    if args.root is not None and collective not in ROOTED:
        raise UsageError(f"argument --root: applies only to {', '.join(ROOTED)}; {collective} has no root")
    root = 0 if args.root is None else args.root
    if root >= args.nranks:
        raise UsageError(f"argument --root: must be in [0, {args.nranks}) for -n {args.nranks}, got {root}")
    if args.count is not None and collective == "barrier":
        raise UsageError("argument --count: does not apply to barrier, which moves no data")
    if args.dtype not in DTYPES:
        raise UsageError(f"argument --dtype: must be one of {', '.join(DTYPES)}, got {args.dtype!r}")
    fmt = args.format
    if fmt is None:
        suffix = os.path.splitext(args.output or "")[1].lower()
        fmt = _SUFFIXES.get(suffix, "text")
    if fmt == "png":
        from meshcomm.explain import png

        if not png.available():
            raise UsageError(png.MISSING)
        if args.output is None and sys.stdout.isatty():
            raise UsageError("argument --format: png is binary data; give -o FILE.png or redirect stdout")

    problem = make_problem(collective, args.nranks, args.count, root)
    if args.ranks_per_host is not None:
        problem = dataclasses.replace(problem, hosts=tuple(r // args.ranks_per_host for r in range(args.nranks)))
    trace = build_trace(problem, args.algo, args.dtype)
    color = fmt == "text" and args.output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    drawing = render(trace, fmt, color=color)
    if args.output is not None:
        mode = "wb" if isinstance(drawing, bytes) else "w"
        with open(args.output, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
            f.write(drawing)
        print(f"meshcomm explain: wrote {args.output} ({trace.title}, {len(trace.steps)} steps)", file=sys.stderr)
    elif isinstance(drawing, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(drawing)
    else:
        sys.stdout.write(drawing)
    return 0

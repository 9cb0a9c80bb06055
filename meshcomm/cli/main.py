"""`meshcomm` entry point: finds the subcommand in a registry and runs it."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence

# name -> (one-line help, module). A module provides add_arguments(parser) and
# run(args) -> int and imports anything heavy inside run(), so `meshcomm --help`
# stays fast and a broken subcommand cannot break the others. A new subcommand
# (bench, explain, sim, tune, doctor) is one more row.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("start N processes of a program as one meshcomm (or torchrun-style) job", "meshcomm.cli.run"),
    "store": ("serve a standalone rendezvous store (MESHCOMM_STORE=external jobs connect to it)", "meshcomm.cli.store"),
    "bench": ("time collectives nccl-tests style, alone or beside gloo and MPICH (--compare)", "meshcomm.cli.bench"),
    "explain": ("draw a collective's algorithm step by step: text, svg, png or an html page", "meshcomm.cli.explain"),
    "trace": ("merge the per-rank trace files of a MESHCOMM_TRACE job into one Perfetto/chrome://tracing file", "meshcomm.cli.trace"),
    "sim": ("predict collectives' times from the cost model on any topology and scale (e.g. 24,576 ranks)",
            "meshcomm.cli.sim"),
    "tune": ("measure the cost model's latency and bandwidth here and save them (for MESHCOMM_TUNING)", "meshcomm.cli.tune"),
    "doctor": ("what this installation runs; with DUMPDIR, name the rank of a failed job that diverged or stalled",
               "meshcomm.cli.doctor"),
}


class UsageError(Exception):
    """A bad combination of arguments that a subcommand found after argparse: exits 2 with usage."""


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("meshcomm")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _chosen(argv: Sequence[str]) -> str | None:
    # The top-level parser has only flags, so the first bare word is the subcommand.
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="meshcomm",
        description="meshcomm: collective communication for Python processes.",
    )
    parser.add_argument("--version", action="version", version=f"meshcomm {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    chosen = _chosen(argv)
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, (help_text, module_name) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module_name).add_arguments(sub)
        parsers[name] = sub
    return parser, parsers


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, parsers = build_parser(argv)
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        module = importlib.import_module(SUBCOMMANDS[args.command][1])
        try:
            code = int(module.run(args))
        except UsageError as exc:
            parsers[args.command].error(str(exc))  # exits 2, printing the subcommand's usage
        except BrokenPipeError:
            # `meshcomm sim ... | head`: the reader left mid-table. Stop as a Unix tool killed by SIGPIPE would.
            _silence_stdout()
            return 128 + signal.SIGPIPE
        _flush_stdout()
        return code
    except SystemExit as exc:
        # argparse exits for --help, --version and bad arguments; callers of main() get a code.
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        return 130


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `meshcomm run ... | head`: the reader left
        _silence_stdout()


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit does not print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())

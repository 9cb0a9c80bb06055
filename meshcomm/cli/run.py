"""`meshcomm run`: parses the command line for the launcher (meshcomm.launcher does the work)."""

from __future__ import annotations

import argparse
import os
import shutil

from meshcomm.cli import argtypes
from meshcomm.cli.main import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "meshcomm run [options] script.py [args ...]\n"
        "       meshcomm run [options] -m module [args ...]\n"
        "       meshcomm run [options] [--] command [args ...]   (a command on PATH, such as python prog.py)"
    )
    # Abbreviations off: `--master` must not silently mean one of two options.
    parser.allow_abbrev = False
    parser.add_argument("-n", "--nproc-per-node", "--nproc_per_node", dest="nproc", type=argtypes.positive_int, default=1,
                        metavar="N", help="processes on this host (default 1)")
    parser.add_argument("--nnodes", type=argtypes.positive_int, default=1, help="number of hosts in the job (default 1)")
    parser.add_argument("--node-rank", "--node_rank", dest="node_rank", type=argtypes.non_negative_int, default=0,
                        help="this host's index in [0, nnodes) (default 0)")
    parser.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1",
                        help="address of rank 0's host, where the store listens (default 127.0.0.1)")
    parser.add_argument("--master-port", "--master_port", dest="master_port", type=argtypes.port, default=0,
                        help="port of the store; 0 picks a free one (one host only; required with --nnodes > 1)")
    parser.add_argument("--no-prefix", dest="prefix", action="store_false",
                        help="pass ranks' output through unchanged instead of prefixing lines with [rankN]: ")
    parser.add_argument("--timeout", type=argtypes.positive_seconds, default=None,
                        help="deadline in seconds for every blocking operation (sets MESHCOMM_TIMEOUT)")
    parser.add_argument("--host-id", dest="host_id", default=None,
                        help="host identity for the ranks (sets MESHCOMM_HOST_ID; tests fake hosts with it)")
    parser.add_argument("--max-restarts", "--max_restarts", dest="max_restarts", type=argtypes.non_negative_int,
                        default=0, help="when a rank fails, stop every rank and start them all again, up to this many "
                                        "times (MESHCOMM_RESTART_COUNT tells the program the attempt; default 0)")
    parser.add_argument("--on-failure", "--on_failure", dest="on_failure", choices=("stop", "continue"),
                        default="stop", help="when a rank is killed: 'stop' every rank (default), or 'continue' so "
                                             "that the survivors can shrink their groups and go on")
    parser.add_argument("-m", "--module", action="store_true",
                        help="the program is a Python module, run as `python -m module`")
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="script.py | module | -- command",
                        help="what every rank runs, with its arguments")


def command_of(args: argparse.Namespace) -> list[str]:
    """The argv every rank runs, from the three forms (script, -m module, -- command)."""
    from meshcomm.launcher import python_module_command, python_script_command

    program: list[str] = list(args.program)
    # REMAINDER keeps a leading '--' (every Python >= 3.10), which marks the command form.
    if program and program[0] == "--":
        if args.module:
            raise UsageError("-m/--module names a Python module; it cannot be combined with '-- command'")
        if len(program) == 1:
            raise UsageError("'--' must be followed by the command to run")
        return program[1:]
    if not program:
        raise UsageError("nothing to run: give script.py, -m module, or -- command")
    name, rest = program[0], program[1:]
    if args.module:
        return python_module_command(name, rest)
    if not os.path.isfile(name):
        if os.sep not in name and shutil.which(name):
            return program  # `meshcomm run -n 4 python prog.py`, as with mpiexec: a command on PATH
        raise UsageError(
            f"script {name!r} is not a file; to run a program that is not a Python script, "
            f"put it after '--' (meshcomm run -n {args.nproc} -- {' '.join(program)})"
        )
    if _is_binary_program(name):
        return program  # `meshcomm run -n 4 /usr/bin/python3 prog.py`: a compiled program, not a script
    return python_script_command(name, rest)


def _is_binary_program(path: str) -> bool:
    """An executable file in a binary format (ELF), which Python cannot run as a script."""
    if not os.access(path, os.X_OK):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def run(args: argparse.Namespace) -> int:
    from meshcomm.launcher import kill_grace, make_layout, run_job

    if args.nnodes > 1 and args.master_port == 0:
        raise UsageError(f"--master-port is required when --nnodes > 1 (got --nnodes {args.nnodes}): "
                         "every node must name the same store port")
    if args.node_rank >= args.nnodes:
        raise UsageError(f"--node-rank must be in [0, {args.nnodes}) for --nnodes {args.nnodes}, got {args.node_rank}")
    if args.on_failure == "continue" and args.max_restarts:
        raise UsageError("--on-failure continue and --max-restarts are alternatives: survivors carry on, or all "
                         "ranks restart")
    cmd = command_of(args)
    try:
        layout = make_layout(args.nproc, nnodes=args.nnodes, node_rank=args.node_rank, master_addr=args.master_addr,
                             master_port=args.master_port, timeout=args.timeout, host_id=args.host_id)
        grace = kill_grace()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return run_job(cmd, layout, prefix=args.prefix, grace=grace, max_restarts=args.max_restarts,
                   fresh_port=args.master_port == 0, carry_on=args.on_failure == "continue")

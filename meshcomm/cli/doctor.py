"""`meshcomm doctor [DUMPDIR]`: this installation's state; with DUMPDIR, line up the ranks' flight-recorder dumps
and name who diverged or stalled."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dumpdir", nargs="?",
                        help="folder of rank<N>.json dumps (MESHCOMM_DUMP_DIR, or the one an error named); "
                             "without it, what this installation runs")
    parser.add_argument("--last", type=int, default=8, help="sequence numbers shown per group (default 8)")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the dumps agree, 1 when a rank diverged or stalled, 2 when there are no dumps."""
    if args.dumpdir is None:
        print(installation())
        return 0
    from meshcomm.trace import doctor

    text, findings = doctor.report(args.dumpdir, args.last)
    print(text)
    if not findings and text.startswith("no rank"):
        return 2
    return 1 if any(f.kind in ("diverged", "stalled") for f in findings) else 0


def installation() -> str:
    """What runs here: the version, the per-call path, and what the transports can use."""
    import importlib.util
    import os
    import sys

    import numpy as np

    from meshcomm import _version, native
    from meshcomm.transport import cma, futex, shm

    optional = ", ".join(f"{name} {'yes' if importlib.util.find_spec(name) else 'no'}"
                         for name in ("torch", "mpi4py", "ray", "ml_dtypes", "matplotlib"))
    return "\n".join([
        f"meshcomm {_version.__version__} on Python {sys.version.split()[0]}, numpy {np.__version__}",
        f"per-call path: {native.describe()}",
        f"cores: {os.cpu_count()}",
        f"shared memory: {'yes' if shm.available() else 'no'} ({shm.DIRECTORY}{shared_memory_room()}); futex: "
        f"{'yes' if futex.available() else 'no'}; cross-memory attach: "
        f"{'yes' if cma.expected_between_siblings() else 'no'}",
        f"optional packages: {optional}",
    ])


def shared_memory_room() -> str:
    """How much of the shared-memory filesystem is free, beside what a group's board takes per rank at most: a
    board whose touched pages outgrow it kills its ranks with SIGBUS (docs/board.md)."""
    import os

    from meshcomm.board import run as board_run
    from meshcomm.board import segment
    from meshcomm.transport import shm

    try:
        stats = os.statvfs(shm.DIRECTORY)
    except OSError:
        return ""
    free = stats.f_bavail * stats.f_frsize
    per_rank = segment.member_bytes(board_run.SLOT_BYTES, segment.SLOTS, board_run.STAGE_BYTES)
    return (f", {free / 2**20:,.0f} MiB free: whole boards for {free // per_rank:,} ranks, as a group's board takes "
            f"up to {per_rank / 2**20:.0f} MiB per rank, in pages touched only when used")

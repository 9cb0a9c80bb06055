"""`meshcomm doctor DUMPDIR`: line up the ranks' flight-recorder dumps and name who diverged or stalled."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dumpdir", help="folder of rank<N>.json dumps (MESHCOMM_DUMP_DIR, or the one an error named)")
    parser.add_argument("--last", type=int, default=8, help="sequence numbers shown per group (default 8)")


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the dumps agree, 1 when a rank diverged or stalled, 2 when there are no dumps."""
    from meshcomm.trace import doctor

    text, findings = doctor.report(args.dumpdir, args.last)
    print(text)
    if not findings and text.startswith("no rank"):
        return 2
    return 1 if any(f.kind in ("diverged", "stalled") for f in findings) else 0

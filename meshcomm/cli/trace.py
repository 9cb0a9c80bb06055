"""`meshcomm trace merge DIR -o job.json`: one Chrome/Perfetto trace from the rank files of a traced job."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    merge = actions.add_parser("merge", help="merge DIR/rank<N>.jsonl into one trace with send->recv arrows",
                               description="Merge the per-rank files a job wrote under MESHCOMM_TRACE=DIR into "
                                           "one Chrome trace JSON (a track per rank, an arrow per message) that "
                                           "opens in ui.perfetto.dev or chrome://tracing.")
    merge.add_argument("directory", metavar="DIR", help="the job's MESHCOMM_TRACE directory")
    merge.add_argument("-o", "--output", metavar="FILE", default="job.json", help="where to write (default job.json)")


def run(args: argparse.Namespace) -> int:
    from meshcomm.trace import merge

    try:
        merged = merge.merge(args.directory)
    except (ValueError, OSError) as exc:
        print(f"meshcomm trace merge: error: {exc}", file=sys.stderr)
        return 1
    merge.write(merged, args.output)
    notes = []
    if merged.unmatched:
        notes.append(f"{merged.unmatched} messages without their other end")
    if merged.torn_lines:
        notes.append(f"{merged.torn_lines} torn last lines skipped")
    print(
        f"meshcomm trace merge: wrote {args.output}: {len(merged.ranks)} ranks, {merged.events} events, "
        f"{merged.arrows} send->recv arrows" + (f" ({'; '.join(notes)})" if notes else ""),
        file=sys.stderr,
    )
    return 0

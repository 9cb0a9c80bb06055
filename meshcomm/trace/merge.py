"""Merges the per-rank files of one traced job into one Chrome trace with send→recv arrows.

The result opens in Perfetto (ui.perfetto.dev) and chrome://tracing: one
process track per rank ("rank 3"), one thread track per thread that
communicated, timestamps in microseconds from the job's first event. Each
send is linked to the receive that took its bytes by a flow ("bind_id" with
"flow_out" on the send slice and "flow_in" on the receive slice), which the
viewers draw as an arrow.

A send and a receive match when they carry the same message key (kind, group,
sequence number or tag, step) between the same two ranks; several messages
with one key between one pair match in the order they were posted, which is
the order the transport matches them in.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass

from meshcomm.trace.writer import FORMAT

_RANK_FILE = re.compile(r"^rank(\d+)\.jsonl$")


@dataclass
class Merged:
    trace: dict  # the Chrome trace: {"traceEvents": [...], ...}
    ranks: list[int]
    events: int
    arrows: int
    unmatched: int  # messages whose other end is not in the files (a rank that crashed, or left early)
    torn_lines: int  # last lines cut short by a rank that died while writing


def rank_files(directory: str) -> dict[int, str]:
    """rank -> path of its trace file; ValueError when there is nothing to merge."""
    if not os.path.isdir(directory):
        raise ValueError(f"trace directory {directory!r} does not exist or is not a directory")
    found = {}
    for name in os.listdir(directory):
        match = _RANK_FILE.match(name)
        if match:
            found[int(match.group(1))] = os.path.join(directory, name)
    if not found:
        raise ValueError(
            f"no rank<N>.jsonl trace files in {directory!r}: run the job with MESHCOMM_TRACE={directory}"
        )
    return dict(sorted(found.items()))


def _read(path: str) -> tuple[list[dict], int]:
    """The events of one file; a torn last line (a rank killed mid-write) is skipped and counted."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    complete, _, tail = text.rpartition("\n")  # every event line ends with "\n"; a torn one does not
    events = []
    for number, line in enumerate(complete.split("\n"), 1):
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"{path}:{number}: not a trace event: {line[:80]!r}") from None
    if not events or events[0].get("name") != "meshcomm_trace" or events[0].get("args", {}).get("format") != FORMAT:
        raise ValueError(f"{path} is not a meshcomm trace file (its first line does not name {FORMAT!r})")
    return events[1:], int(bool(tail.strip()))


def merge(directory: str) -> Merged:
    files = rank_files(directory)
    metadata, slices, torn = [], [], 0
    for path in files.values():
        events, cut = _read(path)
        torn += cut
        for event in events:
            (slices if event.get("ph") == "X" else metadata).append(event)
    origin = min((event["ts"] for event in slices), default=0)
    for event in slices:
        event["ts"] = _microseconds(event["ts"] - origin)
        event["dur"] = _microseconds(event["dur"])
        if "posted" in event["args"]:
            event["args"]["posted"] = _microseconds(event["args"]["posted"] - origin)
    arrows, unmatched = _link(slices)
    # Parents first where slices start together (an operation, its first step
    # and that step's messages): viewers nest equal-start slices in file order.
    slices.sort(key=lambda event: (event["pid"], event["tid"], event["ts"], -event["dur"]))
    trace = {
        "traceEvents": metadata + slices,
        "displayTimeUnit": "ns",
        "otherData": {"generator": "meshcomm trace merge", "origin_unix_ns": origin, "ranks": list(files)},
    }
    return Merged(trace, list(files), len(slices), arrows, unmatched, torn)


def _microseconds(nanoseconds: int) -> float:
    return round(nanoseconds / 1000, 3)


def _link(slices: list[dict]) -> tuple[int, int]:
    """Bind each send to its receive with a flow id; returns (arrows, messages left unmatched)."""
    ends: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: {"send": [], "recv": []})
    for event in slices:
        if event.get("cat") in ("send", "recv"):
            args = event["args"]
            key = (args["kind"], args["group"], args.get("seq", args.get("tag")), args["step"], args["src"], args["dst"])
            ends[key][event["cat"]].append(event)
    arrows = unmatched = 0
    for pair in ends.values():
        sends = sorted(pair["send"], key=lambda event: event["args"]["posted"])
        recvs = sorted(pair["recv"], key=lambda event: event["args"]["posted"])
        for send, recv in zip(sends, recvs):
            arrows += 1
            send.update(bind_id=arrows, flow_out=True)
            recv.update(bind_id=arrows, flow_in=True)
        unmatched += abs(len(sends) - len(recvs))
    return arrows, unmatched


def write(merged: Merged, output: str) -> None:
    with open(output, "w", encoding="utf-8") as f:
        json.dump(merged.trace, f, separators=(",", ":"))

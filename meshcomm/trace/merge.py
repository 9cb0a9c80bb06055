"""Merges the per-rank files of one traced job into one Chrome trace with send→recv arrows.

The result opens in Perfetto (ui.perfetto.dev) and chrome://tracing: one
process track per rank ("rank 3"); on it a track per thread that ran
collectives (operations with their steps nested inside) and, below each, as
many "messages" tracks as it had messages in flight at once, because
messages overlap without nesting and a track's slices must nest. Timestamps
are microseconds from the job's first event.

Each send is linked to the receive that took its bytes by a flow: a flow start
("s") inside the send slice, near its start (the data cannot leave before it is
posted), and a flow end ("f", bound to the enclosing slice) inside the receive
slice, near its end (when the receiver saw the data). The viewers bind flow
events to the slice open on their track at their time, which is why each
message has a track of its own at that moment; they draw the flow as an arrow.

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
    metadata += _message_lanes(slices, metadata)
    flows, arrows, unmatched = _link(slices)
    # Parents first where slices start together (an operation and its first
    # step): viewers nest equal-start slices in file order.
    slices.sort(key=lambda event: (event["pid"], event["tid"], event["ts"], -event["dur"]))
    trace = {
        "traceEvents": metadata + slices + flows,
        "displayTimeUnit": "ns",
        "otherData": {"generator": "meshcomm trace merge", "origin_unix_ns": origin, "ranks": list(files)},
    }
    return Merged(trace, list(files), len(slices), arrows, unmatched, torn)


def _microseconds(nanoseconds: int) -> float:
    return round(nanoseconds / 1000, 3)


_LANES_PER_THREAD = 1000


def _message_lanes(slices: list[dict], metadata: list[dict]) -> list[dict]:
    """Move each message to the first free "messages" track of its thread; returns those tracks' names."""
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in metadata if e.get("name") == "thread_name"}
    lane_ends: dict[tuple[int, int], list[float]] = defaultdict(list)  # (pid, tid) -> end of each lane's last slice
    messages = sorted((e for e in slices if e["cat"] in ("send", "recv")), key=lambda e: (e["pid"], e["tid"], e["ts"]))
    for event in messages:
        ends = lane_ends[(event["pid"], event["tid"])]
        lane = next((i for i, end in enumerate(ends) if end <= event["ts"]), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = event["ts"] + event["dur"]
        event["tid"] = (event["tid"] + 1) * _LANES_PER_THREAD + lane
    lanes = []
    for (pid, tid), ends in sorted(lane_ends.items()):
        for lane in range(len(ends)):
            lane_tid = (tid + 1) * _LANES_PER_THREAD + lane
            name = f"{names.get((pid, tid), f'thread {tid}')} messages {lane + 1}"
            lanes.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane_tid, "args": {"name": name}})
            lanes.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": lane_tid, "args": {"sort_index": lane_tid}})
    return lanes


def _link(slices: list[dict]) -> tuple[list[dict], int, int]:
    """A flow from each send to its receive; returns (flow events, arrows, messages left unmatched)."""
    ends: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: {"send": [], "recv": []})
    for event in slices:
        if event["cat"] in ("send", "recv"):
            args = event["args"]
            key = (args["kind"], args["group"], args.get("seq", args.get("tag")), args["step"], args["src"], args["dst"])
            ends[key][event["cat"]].append(event)
    flows, unmatched = [], 0
    for pair in ends.values():
        sends = sorted(pair["send"], key=lambda event: event["ts"])  # posting order
        recvs = sorted(pair["recv"], key=lambda event: event["ts"])
        for send, recv in zip(sends, recvs):
            arrow = len(flows) // 2 + 1
            inside_send = round(send["ts"] + min(send["dur"], 1.0) / 2, 3)
            inside_recv = round(recv["ts"] + recv["dur"] - min(recv["dur"], 1.0) / 2, 3)
            common = {"cat": "message", "name": "message", "id": arrow}
            flows.append({"ph": "s", "pid": send["pid"], "tid": send["tid"], "ts": inside_send, **common})
            flows.append({"ph": "f", "bp": "e", "pid": recv["pid"], "tid": recv["tid"], "ts": inside_recv, **common})
        unmatched += abs(len(sends) - len(recvs))
    return flows, len(flows) // 2, unmatched


def write(merged: Merged, output: str) -> None:
    with open(output, "w", encoding="utf-8") as f:
        json.dump(merged.trace, f, separators=(",", ":"))

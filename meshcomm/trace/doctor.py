"""Reading the ranks' flight-recorder dumps together: who diverged, who stalled.

Collectives of one group are numbered alike on every rank, so the dumps line
up by (group, sequence number). Two findings matter, in this order:

- divergence: at some sequence number ranks called different collectives
  (or dtypes, sizes, roots); the first such number is where the program's
  control flow split, and the ranks in the minority are named;
- stall: a rank whose last operation in a group is behind the others' (or
  that never started the operation the others are in) is where the job got
  stuck; the rank furthest behind is named first.

Point-to-point operations are not numbered alike across ranks, so they stay
out of that comparison; a send or receive still unfinished at the dump is
listed after the findings above (a receive nobody sends to hangs like a
collective a rank skipped).

A rank without a dump is reported too: it died (SIGKILL leaves nothing) or was
never asked to dump.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
from dataclasses import dataclass


@dataclass
class Finding:
    kind: str  # "diverged" | "stalled" | "missing" | "p2p pending"
    ranks: list
    text: str


def load(directory: str) -> dict[int, dict]:
    """rank -> its dump, for every rank<N>.json in `directory`."""
    dumps = {}
    for path in glob.glob(os.path.join(directory, "rank*.json")):
        if not re.fullmatch(r"rank\d+\.json", os.path.basename(path)):
            continue
        with open(path) as source:
            dump = json.load(source)
        dumps[int(dump["rank"])] = dump
    return dumps


def _by_group(dumps: dict[int, dict]) -> dict[str, dict[int, dict[int, dict]]]:
    """group -> rank -> seq -> operation."""
    groups: dict[str, dict[int, dict[int, dict]]] = collections.defaultdict(dict)
    for rank, dump in dumps.items():
        for op in dump["operations"]:
            if op.get("kind") != "p2p":
                groups[op["group"]].setdefault(rank, {})[op["seq"]] = op
    return groups


def diagnose(dumps: dict[int, dict]) -> list[Finding]:
    findings = []
    world = max((d.get("world_size", 0) for d in dumps.values()), default=0)
    missing = sorted(set(range(world)) - set(dumps))
    if missing:
        findings.append(Finding("missing", missing, f"no dump from ranks {missing}: dead (SIGKILL leaves none) or never asked"))
    for group, ranks in sorted(_by_group(dumps).items()):
        findings.extend(_divergence(group, ranks))
        findings.extend(_stall(group, ranks))
    for rank, dump in sorted(dumps.items()):
        for op in dump["operations"]:
            if op.get("kind") == "p2p" and op["state"] == "started":
                findings.append(Finding("p2p pending", [rank], f"rank {rank}: {op['call']} in group {op['group']!r} "
                                                               f"had not completed"))
    order = {"diverged": 0, "stalled": 1, "missing": 2, "p2p pending": 3}
    return sorted(findings, key=lambda f: order[f.kind])


def _divergence(group: str, ranks: dict[int, dict[int, dict]]) -> list[Finding]:
    shared = sorted(set.union(*(set(ops) for ops in ranks.values())))
    for seq in shared:
        calls = {rank: ops[seq]["call"] for rank, ops in ranks.items() if seq in ops}
        if len(set(calls.values())) < 2:
            continue
        counts = collections.Counter(calls.values())
        usual = max(counts, key=lambda call: (counts[call], -min(r for r, c in calls.items() if c == call)))
        odd = sorted(rank for rank, call in calls.items() if call != usual)
        theirs = "; ".join(f"rank {rank} called {calls[rank]}" for rank in odd)
        usual_ranks = sorted(rank for rank, call in calls.items() if call == usual)
        return [Finding("diverged", odd, f"group {group!r} seq {seq}: {theirs}, while ranks {usual_ranks} called {usual}")]
    return []


def _stall(group: str, ranks: dict[int, dict[int, dict]]) -> list[Finding]:
    last = {rank: max(ops) for rank, ops in ranks.items()}
    front = max(last.values())
    behind = sorted((seq, rank) for rank, seq in last.items() if seq < front)
    if not behind:
        return []
    ahead = sorted(rank for rank, seq in last.items() if seq == front)
    front_call = ranks[ahead[0]][front]["call"]
    findings = []
    for seq, rank in behind:
        op = ranks[rank][seq]
        findings.append(Finding(
            "stalled", [rank],
            f"group {group!r}: rank {rank} is behind, its last operation is seq {seq} {op['call']} ({op['state']}), "
            f"while ranks {ahead} are in seq {front} {front_call}",
        ))
    return findings


def _cell(op: dict | None) -> str:
    if op is None:
        return "-"
    seconds = "" if op["seconds"] is None else f" {op['seconds'] * 1e3:.1f}ms"
    return f"{op['collective']} {op['dtype']}x{op['count']} {op['state']}{seconds}"


def side_by_side(dumps: dict[int, dict], last: int = 8) -> str:
    """Each group's last `last` sequence numbers, one column per rank."""
    lines = []
    ranks_present = sorted(dumps)
    for group, ranks in sorted(_by_group(dumps).items()):
        seqs = sorted(set().union(*(set(ops) for ops in ranks.values())))[-last:]
        rows = [["seq", *(f"rank {r}" for r in ranks_present)]]
        for seq in seqs:
            rows.append([str(seq), *(_cell(ranks.get(r, {}).get(seq)) for r in ranks_present)])
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines.append(f"group {group!r}:")
        lines.extend("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
    return "\n".join(lines)


def report(directory: str, last: int = 8) -> tuple[str, list[Finding]]:
    dumps = load(directory)
    if not dumps:
        return f"no rank<N>.json dumps in {directory}", []
    reasons = "\n".join(f"  rank {r}: {dumps[r]['reason']}" for r in sorted(dumps))
    findings = diagnose(dumps)
    verdict = "\n".join(f"  {f.kind.upper()}: {f.text}" for f in findings) or "  every rank reached the same operation"
    return f"dumps in {directory}:\n{reasons}\n\n{side_by_side(dumps, last)}\n\nfindings:\n{verdict}", findings

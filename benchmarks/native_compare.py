"""meshcomm now beside an earlier meshcomm tree and the rivals, in rounds: medians and ranges, as markdown.

Each round runs `meshcomm bench` once on the earlier tree (`--before`, put first on PYTHONPATH) and once on
this one, the earlier first in even rounds and second in odd ones, with `--compare` rivals timed inside this
tree's run (interleaved call by call). Ratios are taken within a round, then their median and range over the
rounds is given.

    python benchmarks/native_compare.py --before /tmp/old -n 2 --colls all_reduce,broadcast --sizes 8,1M \\
        --compare mpich --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rounds import at_least_three, spread

HERE = Path(__file__).resolve().parents[1]


def bench(tree: Path, args: argparse.Namespace, compare: str | None) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "meshcomm", "bench", "-n", str(args.n), "--sizes", args.sizes,
                   "--json", out.name, *args.colls.split(",")]
        if compare:
            command += ["--compare", compare]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(command, env=env, cwd=tempfile.gettempdir(), check=True, timeout=args.timeout,
                       stdout=subprocess.DEVNULL)
        return [json.loads(line) for line in Path(out.name).read_text().splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an earlier meshcomm tree (a git worktree)")
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--colls", default="all_reduce")
    parser.add_argument("--sizes", default="8")
    parser.add_argument("--compare", default="mpich")
    parser.add_argument("--repeats", type=at_least_three, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    times: dict[tuple, list[float]] = defaultdict(list)  # (coll, bytes, label) -> µs per round
    ratios: dict[tuple, list[float]] = defaultdict(list)  # (coll, bytes, rival) -> now ÷ rival per round
    for round_number in range(args.repeats):
        runs = ([("before", args.before, None)] if args.before else []) + [("now", HERE, args.compare or None)]
        if round_number % 2:  # whichever tree runs second in a round measured slower (results of 2026-11-28)
            runs.reverse()
        rows = [dict(row, label=label if row["lib"] == "meshcomm" else row["lib"])
                for label, tree, compare in runs for row in bench(tree, args, compare)]
        this_round = {(row["coll"], row["bytes"], row["label"]): row["time_us"] for row in rows}
        for key, value in this_round.items():
            times[key].append(value)
        for (coll, size, label), value in this_round.items():
            if label != "now":
                ratios[(coll, size, label)].append(this_round[(coll, size, "now")] / value)
    labels = (["before"] if args.before else []) + ["now"] + (args.compare.split(",") if args.compare else [])
    rivals = [label for label in labels if label != "now"]
    print(f"# {args.n} ranks; µs, median (range) of {args.repeats} rounds; ratio = now ÷ other, per round\n")
    print("| collective | bytes | " + " | ".join(f"{label} µs" for label in labels) + " | "
          + " | ".join(f"now ÷ {rival}" for rival in rivals) + " |")
    print("|---|---:|" + "---:|" * (len(labels) + len(rivals)))
    for coll, size in sorted({(c, s) for c, s, _ in times}, key=lambda k: (args.colls.split(",").index(k[0]), k[1])):
        cells = [spread(times.get((coll, size, label), [])) for label in labels]
        cells += [spread(ratios.get((coll, size, rival), [])) for rival in rivals]
        print(f"| {coll} | {size} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

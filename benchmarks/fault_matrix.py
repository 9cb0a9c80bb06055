"""The full fault matrix: time to error on every surviving rank, and the error, per case.

    python benchmarks/fault_matrix.py                  # everything (a few minutes)
    python benchmarks/fault_matrix.py --only kill      # one family: kill, desync, dtype, size, never, abort, store

Cases: SIGKILL of each rank position during all_reduce, broadcast and
all_gather at 2, 3 and 4 ranks; every pair of different collectives among
all_reduce, broadcast, all_gather, reduce_scatter and barrier at 3 ranks; a
wrong dtype and a wrong size; a rank that never arrives (timeout 3 s); abort;
a store that dies. Time to error is measured from the kill (kill), from the
abort() call (abort), else from when the rank entered the collective. A case
HANGS if any rank is still running after its bound; the harness then kills it.
Runs the rank program of tests/faults through its harness.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults.harness import run_scenario  # noqa: E402

KILLED = ("all_reduce", "broadcast", "all_gather")
DESYNC = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier")


def cases(only: str | None):
    for nranks in (2, 3, 4):
        for collective in KILLED:
            for victim in range(nranks):
                yield "kill", nranks, collective, victim, "", 60.0
    for first, second in itertools.permutations(DESYNC, 2):
        yield "desync", 3, first, 1, second, 30.0
    yield "dtype", 3, "all_gather", 2, "", 30.0
    yield "size", 3, "all_reduce", 0, "", 30.0
    yield "never", 3, "all_reduce", 2, "", 3.0
    yield "abort", 3, "all_reduce", 1, "", 60.0
    yield "store", 3, "all_reduce", 2, "", 3.0


def summarize(message: str, width: int) -> str:
    head = message.split("; flight recorder")[0]
    return head if len(head) <= width else head[: width - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["kill", "desync", "dtype", "size", "never", "abort", "store"])
    parser.add_argument("--width", type=int, default=140, help="characters of each message shown")
    args = parser.parse_args()
    worst, hangs, silent = 0.0, 0, 0
    print("| case | ranks | victim | rank: error after s | message (one survivor) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for scenario, nranks, collective, victim, other, timeout in cases(args.only):
            if args.only and scenario != args.only:
                continue
            run = run_scenario(Path(scratch), nranks, scenario, collective, victim, other, timeout=timeout,
                               bound=timeout + 40)
            spared = None if scenario in ("desync", "dtype", "size", "abort") else victim
            if scenario == "abort":
                run.kill_time = run.outcomes[victim].result["started"] if run.outcomes[victim].result else None
            cells, message = [], ""
            for outcome in run.survivors(spared):
                seconds = run.seconds_to_error(outcome)
                if "HUNG" in outcome.stderr:
                    hangs += 1
                    cells.append(f"{outcome.rank}: HUNG")
                elif seconds is None:
                    silent += 1
                    cells.append(f"{outcome.rank}: no error")
                else:
                    worst = max(worst, seconds) if scenario not in ("never", "store") else worst
                    cells.append(f"{outcome.rank}: {outcome.error} {seconds:.2f}")
                    message = message or outcome.message if outcome.rank != victim else message
            name = f"{scenario} {collective}" + (f" vs {other}" if other else "")
            print(f"| {name} | {nranks} | {victim} | {'; '.join(cells)} | {summarize(message, args.width)} |",
                  flush=True)
    print(f"\nworst time to error (kill, desync, dtype, size, abort): {worst:.2f} s; hangs: {hangs}; "
          f"ranks without an error: {silent}")
    return 1 if hangs or silent else 0


if __name__ == "__main__":
    sys.exit(main())

"""Rank 0 leaves right after its last call: how many jobs still end right, on an idle or a loaded machine.

    python benchmarks/early_exit.py [--ranks 2,3,4,8] [--repeats 1] [--load 2]

Every collective (and send/recv), in a slot of the board and larger, rank 0 leaving with and without
destroy_process_group(); ranks are plain processes with rank 0 serving the store, as a tutorial's are
(tests/faults/leave_early_program.py). `--load K` runs K busy loops beside the jobs. Prints each failure and the
counts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ranks import run_program  # noqa: E402

PROGRAM = ROOT / "tests" / "faults" / "leave_early_program.py"
CALLS = ("all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "all_to_all",
         "barrier", "send")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,3,4,8")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the jobs")
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    runs = failures = 0
    try:
        for _ in range(args.repeats):
            for nranks in (int(n) for n in args.ranks.split(",")):
                for call in CALLS:
                    for count in (4, 40000):
                        for leaving in ("exit", "destroy"):
                            exits = run_program(PROGRAM, nranks, [call, str(count), leaving], timeout=60)
                            runs += 1
                            bad = [(rank, done.returncode, done.stderr[-500:]) for rank, done in enumerate(exits)
                                   if done.returncode != 0 or f"RESULT {rank} ok" not in done.stdout]
                            if bad:
                                failures += 1
                                print(f"FAILED {nranks} ranks, {call} of {count}, rank 0 {leaving}: {bad}", flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"{runs} jobs, {failures} failed (ranks {args.ranks}, {args.load} busy loops beside)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

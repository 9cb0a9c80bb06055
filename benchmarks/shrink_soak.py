"""Shrink soak: ranks loop over mixed collectives while a random rank is SIGKILLed at a random time, again and
again; the survivors shrink and go on, down to MIN ranks. Counts wrong results and hangs, and times each kill to
the survivors' new group.

    python benchmarks/shrink_soak.py [-n 8] [--min 2] [--seconds 30] [--kill-every 2.0] [--load 0] [--runs 1]

Ranks are plain processes (tests/faults/shrink_soak_program.py); rank 0 serves the job's store and may be killed
like any other. Kills come every `--kill-every` seconds times a random factor in [0.5, 1.5], the first after
the job has started. A rank still running `--seconds` + 60 s after the start is a hang (killed and counted).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ranks import fresh_job_env, free_port  # noqa: E402

PROGRAM = ROOT / "tests" / "faults" / "shrink_soak_program.py"


def one_run(nranks: int, smallest: int, seconds: float, kill_every: float, seed: int) -> dict:
    chooser = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="meshcomm-shrink-soak-") as out:
        env = fresh_job_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(nranks)})
        ranks = [subprocess.Popen([sys.executable, str(PROGRAM), out, str(seconds)],
                                  env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)
                 for r in range(nranks)]
        started = time.monotonic()
        kills: list[tuple[int, float]] = []
        hangs = 0
        try:
            while True:
                live = [r for r, p in enumerate(ranks) if p.poll() is None]
                if len(live) <= smallest or time.monotonic() - started > seconds * 0.8 or len(live) < len(ranks) - len(kills):
                    break
                time.sleep(kill_every * chooser.uniform(0.5, 1.5))
                live = [r for r, p in enumerate(ranks) if p.poll() is None]
                if len(live) <= smallest:
                    break
                victim = chooser.choice(live)
                os.kill(ranks[victim].pid, signal.SIGKILL)
                kills.append((victim, time.monotonic()))
            deadline = started + seconds + 60
            for p in ranks:
                try:
                    p.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    hangs += 1
        finally:
            for p in ranks:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        killed = {victim for victim, _ in kills}
        errors = {r: p.stderr.read().decode(errors="replace")[-1500:] for r, p in enumerate(ranks)
                  if r not in killed and p.returncode != 0}
        for p in ranks:
            p.stderr.close()
        reports = [json.loads(f.read_text()) for f in sorted(Path(out).glob("rank*.json"))]
    survivors = sorted(set(range(nranks)) - killed)
    regroup = []
    for index, (_, at) in enumerate(kills):
        # The survivors' record of the shrink that followed kill `index` (the group it left them in).
        done = [r["shrinks"][index]["shrunk"] for r in reports if len(r["shrinks"]) > index]
        if done:
            regroup.append(max(done) - at)
    return {"kills": len(kills), "survivors": survivors, "reports": len(reports), "calls": sum(r["calls"] for r in reports),
            "wrong": sum(r["wrong"] for r in reports), "hangs": hangs, "failed": errors,
            "final_sizes": sorted({r["size"] for r in reports}), "regroup_s": regroup}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--min", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--kill-every", type=float, default=2.0)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the jobs")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    bad = 0
    regroup: list[float] = []
    try:
        for run in range(args.runs):
            result = one_run(args.n, args.min, args.seconds, args.kill_every, seed=run)
            regroup += result["regroup_s"]
            ok = (not result["wrong"] and not result["hangs"] and not result["failed"]
                  and result["reports"] == len(result["survivors"]) and result["final_sizes"] == [len(result["survivors"])])
            bad += not ok
            print(f"run {run}: {result['kills']} kills, survivors {result['survivors']}, {result['calls']} calls, "
                  f"{result['wrong']} wrong, {result['hangs']} hangs, {len(result['failed'])} failed survivors, "
                  f"kill to new group {', '.join(f'{t * 1000:.0f}' for t in result['regroup_s'])} ms"
                  + ("" if ok else f"  <-- {result['failed']}"), flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    if regroup:
        print(f"kill to new group over {len(regroup)} kills: median {statistics.median(regroup) * 1000:.0f} ms, "
              f"range {min(regroup) * 1000:.0f}-{max(regroup) * 1000:.0f} ms")
    print(f"{args.runs - bad} of {args.runs} runs clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak test, run by hand: random collectives on random sub-groups, sizes and dtypes, every result checked.

    python benchmarks/soak.py -n 4 --seconds 300                  # one long job
    python benchmarks/soak.py -n 4 --seconds 300 --kill-every 20  # jobs of ~20 s, each ended by a SIGKILLed rank

Every rank draws the same sequence of operations from one seed; a rank outside
an operation's group skips it. Inputs are small integers, so every reduction
is exact and each result is compared with a reference computed locally with
numpy. With --kill-every, each job gets a random rank SIGKILLed at a random
time; the survivors must fail (PeerLostError, named) and the launcher must end
the job within a bound. Reported: operations done, wrong results (must be 0),
hangs (must be 0), and for killed jobs how long the launcher took to end them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "reduce", "gather",
               "scatter", "barrier")
DTYPES = ("float32", "float64", "int32", "int64")
COUNTS = (1, 7, 1000, 65536, 300_000)
COUNT_WEIGHTS = (4, 4, 4, 2, 1)
REPORT_SECONDS = 2.0


def worker(seconds: float, seed: int) -> None:
    import numpy as np

    import meshcomm as dist

    dist.init_process_group(timeout=60)
    rank, size = dist.get_rank(), dist.get_world_size()
    print(f"PID {rank} {os.getpid()}", flush=True)
    subsets = [combo for k in range(2, size + 1) for combo in itertools.combinations(range(size), k)]
    groups = {ranks: (None if len(ranks) == size else dist.new_group(list(ranks))) for ranks in subsets}
    rng = random.Random(seed)
    ops = wrong = 0
    started = last_report = time.monotonic()
    index = 0
    while True:
        # Every rank decides together when to stop, so no rank is left waiting in a group.
        stop = np.array([time.monotonic() - started >= seconds], np.int32)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop[0]:
            break
        for _ in range(20):
            index += 1
            ranks = rng.choice(subsets)
            collective = rng.choice(COLLECTIVES)
            dtype = np.dtype(rng.choice(DTYPES))
            count = rng.choices(COUNTS, COUNT_WEIGHTS)[0]
            root = rng.randrange(len(ranks))
            if rank not in ranks:
                continue
            me = ranks.index(rank)
            wrong += run_one(dist, np, groups[ranks], len(ranks), me, ranks, collective, dtype, count, root, index)
            ops += 1
        if time.monotonic() - last_report >= REPORT_SECONDS:
            print(f"OPS {rank} {ops} {wrong}", flush=True)
            last_report = time.monotonic()
    print(f"OPS {rank} {ops} {wrong}", flush=True)
    print(f"DONE {rank}", flush=True)
    dist.destroy_process_group()


def value(np, dtype, member: int, index: int, count: int):
    """Rank `member`'s input for operation `index`: small integers, exact in every dtype."""
    return (np.arange(count) % 5 + member + index % 3).astype(dtype)


def run_one(dist, np, group, n: int, me: int, ranks: tuple, collective: str, dtype, count: int, root: int,
            index: int) -> int:
    """Run one collective; return the number of wrong results (0 or 1)."""
    mine = value(np, dtype, me, index, count)
    everyone = [value(np, dtype, m, index, count) for m in range(n)]
    global_root = ranks[root]
    if collective == "all_reduce":
        dist.all_reduce(mine, group=group)
        return int(not np.array_equal(mine, sum(everyone)))
    if collective == "broadcast":
        dist.broadcast(mine, src=global_root, group=group)
        return int(not np.array_equal(mine, everyone[root]))
    if collective == "reduce":
        dist.reduce(mine, dst=global_root, group=group)
        return int(me == root and not np.array_equal(mine, sum(everyone)))
    if collective == "all_gather":
        out = [np.empty(count, dtype) for _ in range(n)]
        dist.all_gather(out, mine, group=group)
        return int(not all(np.array_equal(o, e) for o, e in zip(out, everyone)))
    if collective == "gather":
        out = [np.empty(count, dtype) for _ in range(n)] if me == root else None
        dist.gather(mine, out, dst=global_root, group=group)
        return int(me == root and not all(np.array_equal(o, e) for o, e in zip(out, everyone)))
    if collective == "scatter":
        out = np.empty(count, dtype)
        dist.scatter(out, [value(np, dtype, m, index + 1, count) for m in range(n)] if me == root else None,
                     src=global_root, group=group)
        return int(not np.array_equal(out, value(np, dtype, me, index + 1, count)))
    if collective == "reduce_scatter":
        out = np.empty(count, dtype)
        dist.reduce_scatter(out, [value(np, dtype, me, index + j, count) for j in range(n)], group=group)
        return int(not np.array_equal(out, sum(value(np, dtype, m, index + me, count) for m in range(n))))
    if collective == "all_to_all":
        out = [np.empty(count, dtype) for _ in range(n)]
        dist.all_to_all(out, [value(np, dtype, me * n + j, index, count) for j in range(n)], group=group)
        return int(not all(np.array_equal(out[j], value(np, dtype, j * n + me, index, count)) for j in range(n)))
    dist.barrier(group=group)
    return 0


def run_job(nranks: int, seconds: float, seed: int, kill_after: float | None, bound: float) -> dict:
    """One `meshcomm run` job of the worker; with kill_after, SIGKILL a random rank then."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--timeout", "120", __file__,
               "--worker", "--seconds", str(seconds), "--seed", str(seed)]
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    killed_at = None
    victim = random.Random(seed).randrange(nranks)
    started = time.monotonic()
    while job.poll() is None and time.monotonic() - started < bound:
        pids = {int(m.group(1)): int(m.group(2)) for line in list(lines) if (m := re.search(r"PID (\d+) (\d+)", line))}
        if kill_after is not None and killed_at is None and time.monotonic() - started >= kill_after and victim in pids:
            os.kill(pids[victim], signal.SIGKILL)
            killed_at = time.monotonic()
        time.sleep(0.05)
    hung = job.poll() is None
    if hung:
        os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    reader.join(timeout=30)
    last: dict[int, tuple[int, int]] = {}
    for line in lines:
        match = re.search(r"OPS (\d+) (\d+) (\d+)", line)
        if match:
            last[int(match.group(1))] = (int(match.group(2)), int(match.group(3)))
    return {
        "ops": sum(done for done, _ in last.values()),
        "wrong": sum(bad for _, bad in last.values()),
        "hung": hung,
        "exit": job.returncode,
        "victim": victim if killed_at is not None else None,
        "ended_after_kill": None if killed_at is None or hung else time.monotonic() - killed_at,
        "clean": all(f"DONE {r}" in "\n".join(lines) for r in range(nranks)),
        "tail": [line for line in lines if "Error" in line or "failed" in line][-3:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--nranks", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=300.0, help="total duration")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-every", type=float, default=None, help="seconds per job, ended by a SIGKILLed rank")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seconds, args.seed)
        return 0
    total = {"ops": 0, "wrong": 0, "hangs": 0, "jobs": 0, "killed": 0, "unclean": 0}
    slowest_end = 0.0
    deadline = time.monotonic() + args.seconds
    seed = args.seed
    while time.monotonic() < deadline:
        remaining = deadline - time.monotonic()
        if args.kill_every is None:
            result = run_job(args.nranks, remaining, seed, None, remaining + 180)
        else:
            kill_after = random.Random(seed).uniform(3, max(args.kill_every, 4))
            result = run_job(args.nranks, 10 * args.kill_every, seed, kill_after, kill_after + 60)
        total["jobs"] += 1
        total["ops"] += result["ops"]
        total["wrong"] += result["wrong"]
        total["hangs"] += result["hung"]
        if result["victim"] is not None:
            total["killed"] += 1
            slowest_end = max(slowest_end, result["ended_after_kill"] or 0.0)
        elif not result["clean"]:
            total["unclean"] += 1
        print(f"job {total['jobs']}: seed {seed}, {result['ops']} ops, {result['wrong']} wrong, "
              f"{'HUNG' if result['hung'] else 'exit ' + str(result['exit'])}"
              + (f", rank {result['victim']} killed, job ended {result['ended_after_kill']:.2f} s later"
                 if result["victim"] is not None and not result["hung"] else "")
              + (f"\n    {result['tail'][-1]}" if result["tail"] else ""), flush=True)
        seed += 1
    print(f"\n{total['jobs']} jobs, {total['ops']} operations (counted per rank), {total['wrong']} wrong results, "
          f"{total['hangs']} hangs, {total['unclean']} jobs that failed without a kill"
          + (f", {total['killed']} kills, slowest end after a kill {slowest_end:.2f} s" if args.kill_every else ""))
    return 1 if total["wrong"] or total["hangs"] or total["unclean"] else 0


if __name__ == "__main__":
    sys.exit(main())

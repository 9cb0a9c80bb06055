"""Time from a cut link to the survivors' new group, across emulated hosts (network namespaces; needs root).

    sudo python benchmarks/shrink_across_hosts.py [--hosts 2] [--ranks-per-host 2] [--runs 3]

Every host runs `meshcomm run --on-failure continue tests/multihost/shrink_program.py`. Once all ranks are
READY, the last host's link goes down (`ip link set eth0 down`: silence, no FIN or RST). The other hosts' ranks
notice (the transport's keepalive), shrink over their lifelines and check an all_reduce on the new group. Prints,
per run, the seconds from the cut to each survivor noticing and to its new group, and the new group's size.
The cut-off host's ranks, which see the others go silent too, are stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.multihost.job import launcher  # noqa: E402
from tests.multihost.netns import Network, unavailable  # noqa: E402
from tests.ranks import fresh_job_env, started  # noqa: E402

PROGRAM = os.path.join(ROOT, "tests", "multihost", "shrink_program.py")


def one_run(hosts: int, per_host: int) -> list[dict]:
    environ = fresh_job_env({"MESHCOMM_TOKEN": f"shrink-{os.getpid()}-{time.monotonic_ns()}"})
    lines: list[str] = []
    with Network(hosts) as net:
        procs = []
        try:
            for host in range(hosts):
                argv = launcher(net, host, per_host, ["--on-failure", "continue", PROGRAM], 60)
                procs.append(started(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     grace=2))
            running = [p.__enter__() for p in procs]
            readers = []
            for host, proc in enumerate(running[:-1]):
                reader = threading.Thread(target=lambda p=proc: lines.extend(p.stdout), daemon=True)
                reader.start()
                readers.append(reader)
            threading.Thread(target=lambda: running[-1].stdout.read(), daemon=True).start()
            deadline = time.monotonic() + 60
            while sum("READY" in line for line in lines) < (hosts - 1) * per_host and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            cut = time.monotonic()
            subprocess.run(net.command(hosts - 1, ["ip", "link", "set", "eth0", "down"]), check=True, timeout=10)
            for proc in running[:-1]:
                proc.wait(timeout=90)
            for reader in readers:
                reader.join(timeout=10)
        finally:
            for proc in reversed(procs):
                proc.__exit__(None, None, None)
    found = [json.loads(line.split("SHRUNK ", 1)[1]) for line in lines if "SHRUNK " in line]
    return [{"rank": r["first_rank"], "noticed_s": r["noticed"] - cut, "new_group_s": r["shrunk"] - cut,
             "size": r["size"], "sum": r["sum"]} for r in found]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"cannot build namespaces here: {why}")
        return 2
    survivors = (args.hosts - 1) * args.ranks_per_host
    expected_sum = sum(range(1, survivors + 1))
    worst = []
    bad = 0
    for run in range(args.runs):
        rows = one_run(args.hosts, args.ranks_per_host)
        ok = len(rows) == survivors and all(r["size"] == survivors and r["sum"] == expected_sum for r in rows)
        bad += not ok
        if rows:
            worst.append(max(r["new_group_s"] for r in rows))
        print(f"run {run}: " + "; ".join(f"rank {r['rank']} noticed {r['noticed_s']:.2f} s, new group of {r['size']} "
                                          f"at {r['new_group_s']:.2f} s" for r in sorted(rows, key=lambda r: r["rank"]))
              + ("" if ok else "  <-- not every survivor shrank right"), flush=True)
    if worst:
        print(f"cut to the last survivor's new group: median {statistics.median(worst):.2f} s, "
              f"range {min(worst):.2f}-{max(worst):.2f} s over {len(worst)} runs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

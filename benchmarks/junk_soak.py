"""Jobs under a stream of junk connections to their store, data and lifeline ports: every job must exit 0 with right
results.

    python benchmarks/junk_soak.py [--jobs 30] [-n 2] [--calls 200]

Each job is `meshcomm run -n N` of a program that prints its ranks' data addresses, runs `--calls` checked
all_reduces and leaves (rank 0 without destroy_process_group, as a tutorial's rank 0 does). While it runs, and
until its launcher has exited (its teardown included), a stranger on the same host keeps opening connections to
the store's port, the data ports and the ranks' lifelines: random bytes, zeros, a pickle, an HTTP request line, a half-open connection
that says nothing, and one that is reset at once. Prints the jobs, the connections made, and every job that did
not exit 0 with right results.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

PROGRAM = """
import sys
import numpy as np
import meshcomm as dist
from meshcomm.api import state
dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()
print("DATA " + state.runtime().transport.address, flush=True)
print("DATA " + state.runtime().lifeline.address, flush=True)
calls = int(sys.argv[1])
wrong = 0
for call in range(calls):
    x = np.full(64, rank + call, dtype=np.int64)
    dist.all_reduce(x)
    wrong += int(x[0] != sum(range(size)) + size * call)
print(f"RESULT {rank} wrong {wrong}", flush=True)
if rank != 0:
    dist.destroy_process_group()
"""

JUNK = ("random", "zeros", "pickle", "http", "silent", "reset")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_stranger(address: tuple[str, int], kind: str, rng: random.Random, held: list) -> bool:
    """One junk connection; True if it connected."""
    try:
        sock = socket.create_connection(address, timeout=1)
    except OSError:
        return False
    try:
        if kind == "random":
            sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
        elif kind == "zeros":
            sock.sendall(bytes(rng.randrange(1, 4096)))
        elif kind == "pickle":
            sock.sendall(pickle.dumps({"set": ("rdzv/rank/0", b"me")}))
        elif kind == "http":
            sock.sendall(b"GET / HTTP/1.1\r\nHost: meshcomm\r\n\r\n")
        elif kind == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if kind == "silent":
            held.append(sock)  # held open until the job ends: a half-open stranger
            return True
    except OSError:
        pass
    sock.close()
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("-n", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROGRAM)
        program = f.name
    connections = failed = 0
    try:
        for job in range(args.jobs):
            port = free_port()
            launcher = subprocess.Popen(
                [sys.executable, "-m", "meshcomm", "run", "-n", str(args.n), "--master-port", str(port),
                 "--timeout", "60", program, str(args.calls)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            targets = [("127.0.0.1", port)]
            lines: list[str] = []

            def read() -> None:
                for line in launcher.stdout:
                    lines.append(line)
                    found = re.search(r"DATA (\S+):(\d+)", line)
                    if found:
                        targets.append((found.group(1), int(found.group(2))))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            held: list[socket.socket] = []
            deadline = time.monotonic() + 120
            while launcher.poll() is None and time.monotonic() < deadline:
                connections += one_stranger(rng.choice(targets), rng.choice(JUNK), rng, held)
            if launcher.poll() is None:
                launcher.kill()
            code = launcher.wait()
            reader.join(10)
            stderr = launcher.stderr.read()
            for sock in held:
                sock.close()
            results = [line for line in lines if "RESULT" in line]
            right = len(results) == args.n and all(line.rstrip().endswith("wrong 0") for line in results)
            if code != 0 or not right:
                failed += 1
                print(f"job {job}: exit {code}, results {results}\n{stderr[-2000:]}", flush=True)
    finally:
        os.unlink(program)
    print(f"{args.jobs} jobs of {args.n} ranks x {args.calls} all_reduces, {connections} junk connections; "
          f"{args.jobs - failed} exited 0 with right results, {failed} did not")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

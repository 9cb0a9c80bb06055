"""One rank of a fault scenario; prints `RESULT {json}` with what it saw and when.

python fault_program.py SCENARIO COLLECTIVE VICTIM [OTHER]
  kill      the victim SIGKILLs itself 0.3 s into a loop of COLLECTIVE
  desync    the victim calls OTHER where the rest call COLLECTIVE
  dtype     the victim passes float64 where the rest pass float32
  size      the victim passes one element more
  never     the victim never calls COLLECTIVE (it sleeps past the timeout)
  abort     the victim calls meshcomm.abort() while the rest wait in COLLECTIVE
  store     the external store is killed (FAULT_STORE_PID); the job goes on, then the victim never arrives
  first     the victim SIGKILLs itself before its first collective (the group's board is not made yet)
FAULT_COUNT sets the elements per call (default 2^18). Times are wall-clock (time.time()), comparable across the ranks of one host.
"""

import json
import os
import signal
import sys
import threading
import time

import numpy as np

import meshcomm as dist

COUNT = int(os.environ.get("FAULT_COUNT", 1 << 18))


def call(name: str, rank: int, size: int, dtype=np.float32, count: int = COUNT) -> None:
    x = np.full(count, rank + 1, dtype)
    if name == "all_reduce":
        dist.all_reduce(x)
        assert x[0] == size * (size + 1) / 2
    elif name == "broadcast":
        dist.broadcast(x, src=0)
        assert x[-1] == 1
    elif name == "all_gather":
        out = [np.empty_like(x) for _ in range(size)]
        dist.all_gather(out, x)
        assert [o[0] for o in out] == list(range(1, size + 1))
    elif name == "gather":  # to rank 0
        out = [np.empty_like(x) for _ in range(size)] if rank == 0 else None
        dist.gather(x, out, dst=0)
        assert rank != 0 or [o[0] for o in out] == list(range(1, size + 1))
    elif name == "reduce_scatter":
        out = np.empty(count, dtype)
        dist.reduce_scatter(out, [np.full(count, rank + 1, dtype) for _ in range(size)])
    elif name == "all_to_all":
        out = [np.empty(count // size, dtype) for _ in range(size)]
        dist.all_to_all(out, [np.full(count // size, rank, dtype) for _ in range(size)])
    elif name == "pingpong":  # ranks 0 and 1 bounce x between them; the others sit it out
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)
    elif name == "barrier":
        dist.barrier()
    else:
        raise ValueError(f"unknown collective {name}")


def main() -> None:
    scenario, collective, victim = sys.argv[1], sys.argv[2], int(sys.argv[3])
    other = sys.argv[4] if len(sys.argv) > 4 else ""
    timeout = float(os.environ.get("FAULT_TIMEOUT", "30"))
    dist.init_process_group(timeout=timeout)
    rank, size = dist.get_rank(), dist.get_world_size()
    if scenario == "first" and rank == victim:
        with open(os.environ["FAULT_MARK"], "w") as mark:
            mark.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    if scenario != "first":
        dist.barrier()
    from meshcomm import native

    result = {"rank": rank, "outcome": "ok", "completed": 0, "native": native.core is not None}
    started = time.time()
    try:
        if scenario == "first":
            call(collective, rank, size)
        elif scenario == "kill":
            if rank == victim:
                def die() -> None:
                    with open(os.environ["FAULT_MARK"], "w") as mark:
                        mark.write(repr(time.time()))
                    os.kill(os.getpid(), signal.SIGKILL)
                threading.Timer(0.3, die).start()
            while time.time() - started < timeout:
                call(collective, rank, size)
                result["completed"] += 1
        elif scenario == "desync":
            call(other if rank == victim else collective, rank, size)
            dist.barrier()  # a rank whose part was over (a broadcast root) learns of the mismatch here
        elif scenario == "dtype":
            call(collective, rank, size, np.float64 if rank == victim else np.float32)
            dist.barrier()
        elif scenario == "size":
            call(collective, rank, size, count=COUNT + (rank == victim))
            dist.barrier()
        elif scenario == "never":
            if rank == victim:
                time.sleep(timeout + 3)
            else:
                call(collective, rank, size)
        elif scenario == "abort":
            if rank == victim:
                time.sleep(1.0)
                started = time.time()
                dist.abort("fault test")
            call(collective, rank, size)
        elif scenario == "store":
            if rank == 0:
                os.kill(int(os.environ["FAULT_STORE_PID"]), signal.SIGKILL)
            dist.barrier()
            for _ in range(10):
                call(collective, rank, size)
                result["completed"] += 1
            started = time.time()
            if rank == victim:
                time.sleep(timeout + 3)
            else:
                call(collective, rank, size)
    except dist.MeshcommError as exc:
        from meshcomm.api.state import lanes_of

        # whether the world group had lanes (group/lanes.py) for its repeated calls when the error came
        result.update(outcome="error", error=type(exc).__name__, message=str(exc), laned=bool(lanes_of(None)))
        if isinstance(exc, dist.PeerLostError):
            result["peer"] = exc.peer
    result.update(started=started, ended=time.time())
    print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

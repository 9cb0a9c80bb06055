"""Run by test_point_to_point.py under `meshcomm run -n 3 --on-failure continue`: a receive from a rank that dies.

Rank 2 takes one message and is killed. Rank 0's receive from it, blocking and nonblocking, ends with
PeerLostError naming rank 2, long before the job's timeout; its exchange with rank 1 is untouched.
"""

import os
import signal
import time

import numpy as np

from meshcomm import MPI
from meshcomm.errors import PeerLostError

world = MPI.COMM_WORLD
rank = world.Get_rank()
if rank == 2:
    world.recv(source=0)
    os.kill(os.getpid(), signal.SIGKILL)
elif rank == 0:
    started = time.monotonic()
    pending = world.irecv(source=2, tag=1)
    world.send("go", dest=2)
    for attempt in (lambda: pending.wait(), lambda: world.Recv(np.empty(3), source=2, tag=2)):
        try:
            attempt()
            raise AssertionError("a receive from a killed rank completed")
        except PeerLostError as exc:
            assert exc.peer == 2 and "rank 2" in str(exc), exc
    print(f"LOST 2 after {time.monotonic() - started:.1f} s", flush=True)
    assert world.sendrecv("ping", dest=1, source=1) == "pong"
else:
    assert world.sendrecv("pong", dest=0, source=0) == "ping"
print(f"OK rank {rank}", flush=True)

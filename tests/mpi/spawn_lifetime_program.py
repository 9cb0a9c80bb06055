"""Run by test_dynamic.py as a job of one: how long spawned children live.

`wait FILE`: the child writes FILE a second after it disconnects; the parent
exits at once, and its process must wait for the child first.
`orphan FILE`: the child writes its pid to FILE and sleeps; the parent kills
itself, and the child must exit soon after.
"""

import os
import signal
import sys
import time

from meshcomm import MPI

mode, path = sys.argv[1], sys.argv[2]
if sys.argv[3:4] == ["child"]:
    parent = MPI.Comm.Get_parent()
    if mode == "orphan":
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    parent.Barrier()
    parent.Disconnect()
    time.sleep(1.0 if mode == "wait" else 120.0)
    with open(path, "a") as f:
        f.write("done")
else:
    children = MPI.COMM_SELF.Spawn(sys.executable, [__file__, mode, path, "child"], 1)
    children.Barrier()
    children.Disconnect()
    if mode == "orphan":
        os.kill(os.getpid(), signal.SIGKILL)

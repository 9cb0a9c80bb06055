"""Ranks on several hosts run all_reduces until one host's link goes down; the survivors shrink and go on.

Prints `READY` once past the first collective. When a call fails it shrinks, checks an all_reduce on the new
group against numpy, and prints `SHRUNK {json}` with the monotonic times it noticed the failure and had its new
group, and the new group's size. The timeout is 60 s, so a shrink well before that was not waited out.
"""

from __future__ import annotations

import json
import time

import numpy as np

import meshcomm as dist


def main() -> None:
    dist.init_process_group(timeout=60)
    first = dist.get_rank()
    x = np.ones(4, dtype=np.float32)
    dist.all_reduce(x)
    print("READY", flush=True)
    while True:
        try:
            dist.all_reduce(x)
            time.sleep(0.02)
        except dist.MeshcommError as exc:
            noticed = time.monotonic()
            dist.shrink()
            shrunk = time.monotonic()
            y = np.array([first + 1.0])
            dist.all_reduce(y)
            print("SHRUNK " + json.dumps({"first_rank": first, "noticed": noticed, "shrunk": shrunk,
                                          "size": dist.get_world_size(), "sum": float(y[0]),
                                          "error": type(exc).__name__}), flush=True)
            return


if __name__ == "__main__":
    main()

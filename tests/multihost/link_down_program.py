"""Two ranks on two hosts run all_reduces until one host's link goes down; the survivor reports what it raised.

Prints `READY` once both are past the first collective, then loops; when a
call fails it prints `RAISED {json}` with the exception's type, message and
the seconds from the last successful call to the error. The collectives'
timeout is 120 s, so an error well before that comes from the transport
noticing the silent link, not from the timeout.
"""

from __future__ import annotations

import json
import time

import numpy as np

import meshcomm as dist


def main() -> None:
    dist.init_process_group(timeout=120)
    x = np.ones(4, dtype=np.float32)
    dist.all_reduce(x)
    print("READY", flush=True)
    last = time.monotonic()
    while True:
        try:
            dist.all_reduce(x)
            last = time.monotonic()
            time.sleep(0.05)
        except Exception as exc:  # the report is the point: any error type is printed and judged by the test
            print("RAISED " + json.dumps({"type": type(exc).__name__, "message": str(exc)[:300],
                                          "after": round(time.monotonic() - last, 2)}), flush=True)
            raise SystemExit(3)


if __name__ == "__main__":
    main()

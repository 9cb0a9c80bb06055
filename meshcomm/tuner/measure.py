"""What `meshcomm tune` measures and how it turns timings into the model's parameters.

- α and β of a link class: a ping-pong between ranks 0 and 1 (`meshcomm bench`'s
  pingpong), one job per class: shared memory for "same_host"; TCP
  (MESHCOMM_TRANSPORT=tcp, loopback) stands in for "other_host" on one machine.
  α is the median one-way time of the small messages; β the least-squares
  slope of the rest of the time over the large ones.
- γ and copy: numpy's add and copy on arrays larger than the cache, in this
  process (the executor reduces and copies whole buffers, not cache-sized ones).
- call: what one 8 B all_reduce by recursive doubling costs beyond the
  model's prediction of its steps (Python's per-call work); it shifts every
  algorithm's time alike and so never changes a choice.
- crowded_alpha: the same all_reduce on twice as many ranks as cores (at
  most 16), solved for the message cost that makes the model's prediction
  equal the measurement.
- board: the same all_reduce run `direct` on the group's shared-memory
  board, solved for the fixed cost that makes board/price.py's time equal
  the measurement.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import numpy as np

from meshcomm.tuner.model import Link

SMALL_BYTES = (8, 64, 512)
LARGE_BYTES = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
PINGPONG_BYTES = SMALL_BYTES + LARGE_BYTES
LOCAL_BYTES = 32 << 20


def fit_link(one_way: dict[int, float]) -> Link:
    """α, β from one-way seconds by message bytes (needs SMALL_BYTES and LARGE_BYTES points)."""
    missing = [n for n in PINGPONG_BYTES if n not in one_way]
    if missing:
        raise ValueError(f"ping-pong timings lack the sizes {missing} B")
    alpha = statistics.median(one_way[n] for n in SMALL_BYTES)
    excess = [(n, max(one_way[n] - alpha, 0.0)) for n in LARGE_BYTES]
    beta = sum(n * t for n, t in excess) / sum(n * n for n, _ in excess)
    return Link(alpha=alpha, beta=beta)


def seconds_per_byte(operation, nbytes: int = LOCAL_BYTES, repeats: int = 7) -> float:
    """Median seconds per byte of operation(a, b) on float32 arrays of nbytes."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.ones(nbytes // 4, np.float32)
    operation(a, b)  # touch the pages first
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        operation(a, b)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / nbytes


def gamma() -> float:
    return seconds_per_byte(lambda a, b: np.add(a, b, out=a))


def copy_rate() -> float:
    return seconds_per_byte(np.copyto)


def call_overhead(measured: float, predicted_steps: float) -> float:
    """The per-call cost: a measured small call minus its predicted steps, never below 0."""
    return max(measured - predicted_steps, 0.0)


def solve_linear(measured: float, at_zero: float, at_one: float) -> float:
    """x >= 0 with at_zero + (at_one - at_zero) * x = measured: a prediction linear in one parameter, inverted."""
    slope = at_one - at_zero
    if slope <= 0:
        raise ValueError(f"the prediction does not grow with the parameter (slope {slope})")
    return max((measured - at_zero) / slope, 0.0)


def crowded_ranks(cores: int) -> int | None:
    """Ranks of the job that measures crowded_alpha (twice the cores), or None when that is over 16."""
    return 2 * cores if 2 * cores <= 16 else None


def one_way_times(records: Sequence[dict]) -> dict[int, float]:
    """{bytes: seconds} from `meshcomm bench` pingpong rows (time_us is already one way)."""
    return {int(r["bytes"]): float(r["time_us"]) / 1e6 for r in records if r["coll"] == "pingpong"}

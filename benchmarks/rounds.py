"""What the benchmark scripts that start their own jobs share: a job's RESULT line, calls timed in alternating blocks,
at least three rounds, and a median with its range."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from typing import Callable


def at_least_three(text: str) -> int:
    """argparse's type for a count of rounds: a median of fewer than three is no figure."""
    value = int(text)
    if value < 3:
        raise argparse.ArgumentTypeError(f"must be 3 or more, got {value}: a median of fewer is no figure")
    return value


def spread(values: list[float], digits: int = 3) -> str:
    """The median of `values` with their range, as the results files print it."""
    if not values:
        return "–"
    return f"{statistics.median(values):.{digits}g} ({min(values):.{digits}g}–{max(values):.{digits}g})"


def job_result(command: list[str], what: str, **run) -> dict:
    """Run `command` (subprocess.run's other arguments in `run`) and return the JSON of its line "RESULT {...}";
    SystemExit naming `what`, with the end of its stderr, when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, **run)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if "RESULT " in line)
    return json.loads(line.split("RESULT ", 1)[1])


def alternating_blocks(calls: dict[str, Callable[[], object]], iters: int, blocks: int,
                       barrier: Callable[[], object]) -> dict[str, list[float]]:
    """Seconds per call of each of `calls`, one figure per block of `iters` calls, in `blocks` rounds that
    alternate their order, after a tenth as many warm-up calls; `barrier` lines the ranks up before each block."""
    for call in calls.values():
        for _ in range(iters // 10):
            call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for block in range(blocks):
        for name in (calls if block % 2 == 0 else reversed(calls)):
            call = calls[name]
            barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            seconds[name].append((time.perf_counter() - start) / iters)
    return seconds

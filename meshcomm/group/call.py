"""Call: one collective as a face hands it to its group (Group.collective)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Callable

from meshcomm.algorithms.problem import Problem


@dataclass(slots=True)
class Call:
    """What to compute (`problem`), on which flat arrays (`buffers`: "input"/"output"), and how to finish.

    `dtype` and `op` are names, as they go into the call's fingerprint; `combine` reduces two arrays (None
    for collectives that do not reduce); `algorithm` None lets the group choose; `finish` runs after the
    bytes are in place (copying back, scaling an average) and its value is the Work's result.

    The faces build it with positional arguments, in this order: keyword arguments cost a measurable part
    of a small call.
    """

    problem: Problem
    buffers: dict
    dtype: str
    op: str = "none"
    combine: Callable | None = None
    algorithm: str | None = None
    finish: Callable[[], Any] | None = None
    timeout: float | None = None
    lane: tuple | None = None  # the face's key for this call's shape when a lane may run its repeats (lanes.py)

    @property
    def itemsize(self) -> int:
        sample = self.buffers.get("input")
        if sample is None:
            sample = self.buffers.get("output")
        return sample.itemsize if sample is not None else 1


def seconds(timeout: float | datetime.timedelta) -> float:
    """A timeout as torch spells it (seconds, or a timedelta) in seconds; ValueError unless positive."""
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or a timedelta, got {timeout!r}")
    return float(timeout)

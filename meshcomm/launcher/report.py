"""What the launcher tells the user on stderr when a job did not simply succeed."""

from __future__ import annotations

import signal

from meshcomm.launcher.process import JobResult, describe_returncode


def _ranks(ranks: list[int]) -> str:
    return f"{len(ranks)} other rank{'s' if len(ranks) != 1 else ''} {ranks}" if ranks else "no other rank"


def describe(result: JobResult, who: str = "meshcomm run") -> list[str]:
    """Lines naming which rank failed first, how, its last stderr, and what was stopped."""
    if result.start_error is not None:
        return [f"{who}: {result.start_error}"]
    if result.interrupted_by is not None:
        name = signal.Signals(result.interrupted_by).name
        return [f"{who}: received {name}; forwarded it to {len(result.stopped)} running rank(s) {result.stopped}"]
    failure = result.failure
    carried = [f"{who}: the job carried on without lost rank(s) {result.lost}"] if result.lost else []
    if failure is None:
        return carried
    how = describe_returncode(failure.returncode)
    lines = [f"{who}: rank {failure.rank} (local rank {failure.local_rank}, pid {failure.pid}) failed first: {how}"]
    if failure.stderr_tail:
        lines.append(f"{who}: last {len(failure.stderr_tail)} line(s) of rank {failure.rank}'s stderr:")
        lines.extend(f"    {line}" for line in failure.stderr_tail)
    else:
        lines.append(f"{who}: rank {failure.rank} wrote nothing to stderr")
    lines.append(f"{who}: stopped {_ranks(result.stopped)}")
    return carried + lines

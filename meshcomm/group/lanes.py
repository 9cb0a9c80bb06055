"""Lanes: a face's repeated blocking call of one shape, run from the face to the board in one compiled step.

An 8-byte all_reduce spends most of its time in Python: checking arguments,
describing the call, finding its plan, numbering and recording it (the
per-layer figures are in benchmarks/results/native-2026-11-26.md). Once the compiled path has run
a call, everything decided for it is decided alike for the next call with the
same key, which the face builds from what its checks looked at (the
collective, op, root, dtypes and shapes). The group keeps a compiled Lane per
key; the face hands the next such call straight to it. A lane runs only what
it can vouch for and answers False, before anything moves, for the rest
(calls queued before it, an abort, a revoke, an array laid out otherwise);
a failure once it has posted comes back here (`fallout`) and is raised as
the Python path raises it. docs/native.md has the whole story.
"""

from __future__ import annotations

import numpy as np

from meshcomm.trace.flight_recorder import DONE_STATE, STARTED_STATE

_LANES_KEPT = 64  # a group's lanes, beyond which they are made again as the calls come


def open_lane(group, call, plan, turns) -> None:
    """Keep a lane for the repeats of `call`, which the compiled path just ran by `plan`."""
    if len(group.lanes) >= _LANES_KEPT:
        group.lanes.clear()
    recorder, runtime, seat = group.runtime.recorder, group.runtime, group.seat
    settle = seat.settler(plan)
    combine, timeout = call.combine, group.timeout
    storage = call.buffers["input"].dtype  # narrow floats travel as the integers of their width
    problem = plan.board.problem
    # A reduce's output on a rank other than the root is the face's scratch, thrown away: the lane has none.
    scratch = problem.collective == "reduce" and group.rank != problem.root

    def flat(array):
        return np.asarray(array).reshape(-1).view(storage)

    def fallout(seq: int, entry: list, outcome, deadline: float, input, output) -> bool:
        mine = flat(input)
        buffers = {"input": mine, "output": np.empty_like(mine) if scratch else flat(output)}
        try:
            settle(seq, buffers, combine, timeout, deadline, outcome)
        except Exception as exc:
            recorder.finish(entry, exc)
            raise runtime.explain_failure(group, seq, entry, exc) from None
        recorder.finish(entry)
        return True

    group.lanes[call.lane] = seat.lane(turns, plan, recorder.entries.append, recorder.latest,
                                       (STARTED_STATE, DONE_STATE), fallout, call.buffers["input"].nbytes,
                                       -1 if scratch else call.buffers["output"].nbytes, timeout)

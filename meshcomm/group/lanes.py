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
the Python path raises it. A blocking send or receive of a small message to one
rank gets a lane too, which moves it through the shared-memory ring itself
(open_message_lane). docs/native.md has the whole story.
"""

from __future__ import annotations

import numpy as np

from meshcomm import native
from meshcomm.transport import header as wire

_LANES_KEPT = 64  # a group's lanes, beyond which they are made again as the calls come


# The faces (by the head of their key) that hand their lane one side as a list of blocks, one per member
# (native/blocks.c): which side, by its place among run's arguments, and whether only the root has the list
# (elsewhere that side is the face's placeholder, and the lane has none). A list's blocks are of one size: an uneven
# call gets no lane.
LISTED = {"scatter": (1, True), "gather": (2, True), "reduce_scatter": (1, False), "all_gather": (2, False)}
# Those whose face's finish only copies the list's blocks (and holds them), which the lane does itself.
FINISHED_BY_LANE = frozenset(("scatter", "gather", "all_gather"))


def open_lane(group, call, plan, turns) -> None:
    """Keep a lane for the repeats of `call`, which the compiled path just ran by `plan`."""
    problem = plan.board.problem
    which, rooted = LISTED.get(call.lane[0], (0, False))
    if which and len(set(problem.counts)) > 1:
        return
    if len(group.lanes) >= _LANES_KEPT:
        group.lanes.clear()
    recorder, runtime, seat = group.runtime.recorder, group.runtime, group.seat
    settle = seat.settler(plan)
    combine, timeout = call.combine, group.timeout
    storage = call.buffers["input"].dtype  # narrow floats travel as the integers of their width
    elsewhere = rooted and group.rank != problem.root
    listed = 0 if elsewhere else which
    # A reduce's output on a rank other than the root is the face's scratch, thrown away: the lane has none.
    absent = which if elsewhere else 2 if problem.collective == "reduce" and group.rank != problem.root else 0
    sizes = [call.buffers["input"].size, call.buffers["output"].size]

    def side(given, place: int):
        """run's argument at `place` (1 input, 2 output) as the flat array the Python path computes on."""
        if place == absent:
            return np.empty(sizes[place - 1], storage)
        if place == listed:
            if type(given) is bytes:  # what the lane posted from its scratch (native/_core.c's lane_run)
                return np.frombuffer(given, storage)
            return np.concatenate([np.asarray(block).reshape(-1).view(storage) for block in given])
        return np.asarray(given).reshape(-1).view(storage)

    def fallout(seq: int, record: int, outcome, deadline: float, input, output) -> bool:
        # Only a reduction's run comes back to be computed here, and no listed output is one: a gather's or an
        # all_gather's comes back with an error, raised below.
        try:
            buffers = {"input": side(input, 1), "output": side(output, 2)}
            settle(seq, buffers, combine, timeout, deadline, outcome)
        except Exception as exc:
            recorder.finish(record, exc)
            raise runtime.explain_failure(group, seq, record, exc) from None
        recorder.finish(record)
        return True

    nbytes = [-1 if place == absent else call.buffers[name].nbytes for place, name in ((1, "input"), (2, "output"))]
    group.lanes[call.lane] = seat.lane(turns, plan, recorder.records, fallout, *nbytes, listed, timeout)


def open_message_lane(group, key: tuple, sending: bool, target: int, wire_key: wire.Key, nbytes: int,
                      words: str) -> None:
    """Keep a lane for the repeats of a blocking send to (or receive from) global rank `target` of `nbytes`,
    when the transport lets one write (or take) such messages in its shared-memory ring (native/rings.c); the
    flight recorder gets the record the Python path writes, with `words`."""
    transport = group.runtime.transport
    ring = None if native.core is None else transport.message_ring(target, sending, nbytes)
    if ring is None:
        return
    if len(group.lanes) >= _LANES_KEPT:
        group.lanes.clear()
    *frames, peer = ring
    described = (group.group_name, None, words, "p2p", (target,))
    header = wire.Header(wire_key, wire.NO_FINGERPRINT, nbytes)
    group.lanes[key] = native.core.MessageLane(
        sending, *frames, wire.pack(*header), peer, transport, group.group_id, header,
        group.runtime.recorder.records, described, True if sending else target,
        transport.spin_seconds)

"""Message lanes (meshcomm/group/lanes.py, native/rings.c): a repeated blocking send or receive of a small numpy
array to one rank moves through the shared-memory ring in one compiled step, with the bytes, flight-recorder
entries and errors of the whole path."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tests.board.test_native import _FLOATS, _INTS, _values, on_both_paths
from tests.marks import needs_compiled
from tests.ranks import Cluster

REPEATS = 3  # the first call of a shape makes its lane; the others run on it


class _Counted:
    """A lane whose runs are counted in `ran`, by the first word of its key ("send", "recv")."""

    def __init__(self, lane, kind: str, ran: dict) -> None:
        self.lane, self.kind, self.ran = lane, kind, ran

    def run(self, *arrays):
        answer = self.lane.run(*arrays)
        self.ran[self.kind] += answer is not None and answer is not False
        return answer


class CountingLanes(dict):
    """A group's lanes, handed out counted: `ran` says how many sends and receives they moved."""

    def __init__(self) -> None:
        super().__init__()
        self.ran = {"send": 0, "recv": 0}

    def get(self, key, default=None):
        lane = super().get(key, default)
        return _Counted(lane, key[0], self.ran) if lane is not None and key[0] in self.ran else lane


def exchange_around_the_ring(with_bfloat16: bool) -> tuple[dict, str, list]:
    """Every rank sends to the next and receives from the one before, on every dtype and a few sizes and tags,
    REPEATS times over with new values, in the world and in a sub-group: (the sends and receives lanes moved, a
    digest of every byte received, the flight recorder's point-to-point entries)."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group, runtime
    from meshcomm.group import lanes
    from meshcomm.trace import flight_recorder as fr

    lanes._LANES_KEPT = 1 << 20  # every shape's lanes kept: each repeat after the first runs on them
    rank, n = dist.get_rank(), dist.get_world_size()
    world = resolve_group(None)
    world.lanes = CountingLanes()
    pair = dist.new_group([1, 0])  # both kinds of rank number: the group's own, and the world's
    digest = hashlib.sha256()
    dtypes = ("bool", *_INTS, *_FLOATS, *(("bfloat16",) if with_bfloat16 else ()))
    after, before = (rank + 1) % n, (rank - 1) % n
    shapes = 0
    for dtype in dtypes:
        for count in (0, 1, 7, 300):
            for tag in (0, -3):
                shapes += 1
                for repeat in range(REPEATS):
                    dist.send(_values(dtype, rank + repeat, count), after, tag=tag)
                    got = np.empty(count, dtype)
                    assert dist.recv(got, before, tag=tag) == before
                    digest.update(got.tobytes())
    if rank < 2:
        pair_lanes = resolve_group(pair).lanes = CountingLanes()
        for repeat in range(REPEATS):
            got = np.empty((2, 3), np.int32)
            if rank == 0:
                dist.send(np.arange(6, dtype=np.int32).reshape(2, 3) + repeat, 1, group=pair)
                assert dist.recv(got, 1, group=pair) == 1
            else:
                assert dist.recv(got, 0, group=pair) == 0
                dist.send(got * 2, 0, group=pair)
            digest.update(got.tobytes())
        world.lanes.ran.update({f"pair {k}": v for k, v in pair_lanes.ran.items()})
    # A send's or receive's entry has its words where a collective's has its fingerprint, "p2p" for its algorithm.
    entries = [(entry[fr.GROUP], entry[fr.FINGERPRINT], entry[fr.PEERS], entry[fr.STATE])
               for entry in runtime().recorder.entries() if entry[fr.ALGORITHM] == "p2p"]
    world.lanes.ran["shapes"] = shapes
    return world.lanes.ran, digest.hexdigest(), entries


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_repeated_sends_and_receives_on_lanes_give_the_python_paths_bytes_and_records(n: int) -> None:
    # A receive's lane spins until its message comes: long enough here that a sender off the core still makes it
    # in time, so every repeat runs on its lane (with the default spin, a late one takes the Python path). The
    # flight recorder keeps every call.
    python_results, compiled_results = on_both_paths(n, exchange_around_the_ring, timeout=240,
                                                     env={"MESHCOMM_SPIN_US": "2000000",
                                                          "MESHCOMM_FLIGHT_RECORDER_SIZE": "100000"})
    for rank, ((ran_python, digest_python, entries_python), (ran, digest, entries)) in enumerate(
            zip(python_results, compiled_results)):
        shapes = ran["shapes"]
        assert ran_python == {"send": 0, "recv": 0, "shapes": shapes} | (
            {"pair send": 0, "pair recv": 0} if rank < 2 else {}), ran_python  # the Python path has none
        # On the compiled path every repeat after the first of a shape ran on its lane, in the sub-group too.
        assert ran["send"] == ran["recv"] == shapes * (REPEATS - 1) and shapes >= 48, ran
        if rank < 2:
            assert ran["pair send"] == ran["pair recv"] == REPEATS - 1, ran
        assert digest == digest_python
        # every send and receive recorded alike, done
        assert entries == entries_python and len(entries) == 2 * shapes * REPEATS + (2 * REPEATS if rank < 2 else 0)
        assert {entry[-1] for entry in entries} == {"done"}


def what_a_message_lane_leaves_to_the_face() -> list[str]:
    """Calls with a message lane's key that it must not run itself, on ranks 0 and 1: what came out otherwise
    than the whole path gives."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group

    rank = dist.get_rank()
    other = 1 - rank
    wrong = []

    def bounce(array, tag=0):
        if rank == 0:
            dist.send(array, 1, tag=tag)
        else:
            dist.recv(array, 0, tag=tag)

    for _ in range(2):
        bounce(np.full(4, 7, np.float32))
    lanes = resolve_group(None).lanes
    if ("send" if rank == 0 else "recv", other, 0, np.dtype(np.float32), (4,)) not in lanes:
        wrong.append(f"no message lane after two calls of one shape: {list(lanes)}")
    if rank == 1:  # a read-only receive buffer: the face names it, and nothing moves into it
        frozen = np.zeros(4, np.float32)
        frozen.flags.writeable = False
        try:
            dist.recv(frozen, 0)
            wrong.append("a read-only tensor was received into")
        except ValueError as exc:
            if "read-only" not in str(exc):
                wrong.append(f"read-only: {exc}")
        if frozen.tolist() != [0] * 4:
            wrong.append(f"the read-only tensor changed: {frozen.tolist()}")
    dist.barrier()
    parent = np.full((4, 2), rank, np.float32)
    bounce(parent[:, 0])  # the lane's dtype and shape, not its layout
    if parent[:, 0].tolist() != [0] * 4 or parent[:, 1].tolist() != [rank] * 4:
        wrong.append(f"strided: {parent.tolist()}")
    # Sent in one order, received in the other: the frame at the ring's head is not the lane's.
    for tag in (1, 2):
        bounce(np.full(4, tag, np.float32), tag)
    if rank == 0:
        dist.send(np.full(4, 2, np.float32), 1, tag=2)
        dist.send(np.full(4, 1, np.float32), 1, tag=1)
    else:
        first, second = np.zeros(4, np.float32), np.zeros(4, np.float32)
        dist.recv(first, 0, tag=1)
        dist.recv(second, 0, tag=2)
        if first.tolist() != [1] * 4 or second.tolist() != [2] * 4:
            wrong.append(f"out of order: {first.tolist()} {second.tolist()}")
    # A receive posted earlier for the same key takes the first message; the laned one, the second.
    if rank == 0:
        dist.send(np.full(4, 1, np.float32), 1)
        dist.send(np.full(4, 2, np.float32), 1)
    else:
        early, late = np.zeros(4, np.float32), np.zeros(4, np.float32)
        work = dist.irecv(early)  # from any rank
        dist.recv(late, 0)
        work.wait()
        if early.tolist() != [1] * 4 or late.tolist() != [2] * 4:
            wrong.append(f"posted first: {early.tolist()} {late.tolist()}")
    # A message of another size under the lane's key: the receive fails as on the whole path.
    if rank == 0:
        dist.send(np.full(5, 1, np.float32), 1)
    else:
        try:
            dist.recv(np.zeros(4, np.float32), 0)
            wrong.append("a message of 20 bytes was received into 16")
        except dist.MeshcommError as exc:
            if "20 bytes" not in str(exc):
                wrong.append(f"size: {type(exc).__name__}: {exc}")
    dist.barrier()
    try:  # True == 1, but only an int is a tag
        bounce(np.zeros(4, np.float32), True)
        wrong.append("a tag of True ran")
    except TypeError as exc:
        if "tag must be an int" not in str(exc):
            wrong.append(f"tag=True: {exc}")
    bounce(np.full(4, 3, np.float32))  # the lane still serves its own calls
    return wrong


@needs_compiled
def test_a_message_lane_leaves_what_it_cannot_vouch_for_to_the_faces_checks() -> None:
    with Cluster(2) as ranks:
        assert ranks.run(what_a_message_lane_leaves_to_the_face, timeout=60) == [[], []]


def a_held_header_taken_by_its_lane() -> list[str]:
    """Rank 0 sends a message for a new tag, then one for a laned tag; rank 1 receives the first on the Python
    path, whose engine then reads the second's header and holds it (transport/peer.py). The laned receive must
    take that held message. What came out otherwise."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group, runtime
    from meshcomm.transport import header as wire

    rank = dist.get_rank()
    world = resolve_group(None)
    world.lanes = CountingLanes()
    wrong = []
    for value in (1, 2):  # the lanes of the tag-0 send and receive
        x = np.full(3, value, np.int32)
        if rank == 0:
            dist.send(x, 1)
        else:
            dist.recv(x, 0)
    if rank == 0:
        dist.send(np.full(5, 7, np.int32), 1, tag=9)
        dist.send(np.full(3, 8, np.int32), 1)
        dist.barrier()  # both are in the ring before rank 1 reads either
        return wrong
    dist.barrier()
    first, second = np.zeros(5, np.int32), np.zeros(3, np.int32)
    dist.recv(first, 0, tag=9)
    inbound = runtime().transport._peers[0].inbound
    ours = wire.Header(wire.Key(wire.KIND_P2P, world.group_id, 0, 0), wire.NO_FINGERPRINT, 12)
    if inbound.held != ours:
        wrong.append(f"the engine holds {inbound.held}, not the second message's header")
    laned = world.lanes.ran["recv"]
    dist.recv(second, 0)
    if world.lanes.ran["recv"] != laned + 1 or inbound.held is not None:
        wrong.append(f"the lane did not take the held message: {world.lanes.ran}, held {inbound.held}")
    if first.tolist() != [7] * 5 or second.tolist() != [8] * 3:
        wrong.append(f"received {first.tolist()} {second.tolist()}")
    return wrong


@needs_compiled
def test_a_header_the_engine_holds_is_taken_by_its_lane() -> None:
    with Cluster(2) as ranks:
        assert ranks.run(a_held_header_taken_by_its_lane, timeout=60) == [[], []]

"""Lanes (meshcomm/group/lanes.py): a face's repeated blocking call, run from the face to the board in one compiled
step, gives the bytes, flight-recorder entries, checks and errors of the whole path."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from meshcomm import native
from tests.api.test_message_lanes import _Counted
from tests.board.test_native import _FLOATS, _INTS, _pairs, _values, on_both_paths
from tests.marks import needs_compiled
from tests.ranks import Cluster

REPEATS = 3  # the first call of a shape makes its lane; the others run on it


def counting_lane_runs(ran: dict):
    """Make each lane the groups open from now on count, in `ran`, the calls it ran (its `run` answered True), by
    collective: the faces and their compiled fronts (api/fronts.py) alike run a lane by its `run`. Returns what
    to put back as lanes.open_lane."""
    from meshcomm.group import lanes

    open_lane = lanes.open_lane

    def counted(group, call, plan, turns) -> None:
        open_lane(group, call, plan, turns)
        lane = dict.get(group.lanes, call.lane)
        if lane is not None:
            ran.setdefault(call.lane[0], 0)
            dict.__setitem__(group.lanes, call.lane, _Counted(lane, call.lane[0], ran))

    lanes.open_lane = counted
    return open_lane


def repeat_every_laned_call(with_bfloat16: bool) -> tuple[dict, str, list[str]]:
    """Each call a lane serves, on every dtype and op, REPEATS times over with new values: (how many calls of each
    collective lanes ran, a digest of every byte, what the flight recorder got wrong)."""
    import meshcomm as dist
    from meshcomm import ReduceOp
    from meshcomm.group import lanes
    from meshcomm.api.state import resolve_group, runtime
    from meshcomm.trace import flight_recorder as fr

    ran: dict = {}
    open_lane = counting_lane_runs(ran)
    try:
        return ran, *_repeat_every_laned_call(with_bfloat16, dist, ReduceOp, resolve_group, runtime, fr)
    finally:
        lanes.open_lane = open_lane


def _repeat_every_laned_call(with_bfloat16: bool, dist, ReduceOp, resolve_group, runtime, fr) -> tuple[str, list]:

    g = resolve_group(None)
    rank, n = g.rank, g.size
    digest = hashlib.sha256()
    ops = (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BXOR, ReduceOp.AVG)
    dtypes = ("bool", *_INTS, *_FLOATS, *(("bfloat16",) if with_bfloat16 else ()))
    recorder = runtime().recorder
    for dtype in dtypes:
        floating = dtype in _FLOATS or dtype == "bfloat16"
        for op in ops:
            if (floating and op is ReduceOp.BXOR) or (op is ReduceOp.AVG and not floating):
                continue
            for count in (1, 7, 33):
                for repeat in range(REPEATS):
                    x = _values(dtype, rank + repeat, count)
                    dist.all_reduce(x, op=op)
                    digest.update(x.tobytes())
                    z = np.empty(count, dtype=dtype)
                    dist.reduce_scatter_tensor(z, np.concatenate([_values(dtype, rank + r + repeat, count)
                                                                  for r in range(n)]), op=op)
                    digest.update(z.tobytes())
                    blocks = [_values(dtype, rank + r + repeat, count) for r in range(n)]  # lying apart
                    dist.reduce_scatter(z, blocks, op=op)
                    digest.update(z.tobytes())
                    dist.reduce_scatter(z, np.split(np.concatenate(blocks), n), op=op)  # one after another
                    digest.update(z.tobytes())
                    y = _values(dtype, rank + repeat, count)
                    dist.reduce(y, dst=repeat % n, op=op)  # on the other ranks, y is left as it was
                    digest.update(y.tobytes())
        if dtype in _FLOATS:  # NaN pairs and signed zeros: the C code hands these back to numpy (fallout)
            for op in (ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX):
                for repeat in range(REPEATS):
                    x = _pairs(dtype, rank + repeat, 9)
                    dist.all_reduce(x, op=op)
                    digest.update(x.tobytes())
                    y = _pairs(dtype, rank + repeat, 9)
                    dist.reduce(y, dst=0, op=op)
                    digest.update(y.tobytes())
                    z = np.empty(9, dtype=dtype)
                    dist.reduce_scatter(z, [_pairs(dtype, rank + r + repeat, 9) for r in range(n)], op=op)
                    digest.update(z.tobytes())
        for repeat in range(REPEATS):
            x = _values(dtype, rank + repeat, 5)
            dist.broadcast(x, src=n - 1)
            digest.update(x.tobytes())
            out = np.empty(5 * n, dtype=dtype)
            dist.all_gather_into_tensor(out, _values(dtype, rank + repeat, 5))
            digest.update(out.tobytes())
            out = np.empty(3 * n, dtype=dtype)
            dist.all_to_all_single(out, _values(dtype, rank + repeat, 3 * n))
            digest.update(out.tobytes())
            whole, apart = np.zeros(5 * n, dtype=dtype), [np.zeros(5, dtype=dtype) for _ in range(n)]
            dist.all_gather(list(np.split(whole, n)), _values(dtype, rank + repeat, 5))
            dist.all_gather(apart, _values(dtype, rank + repeat, 5))
            digest.update(b"".join(a.tobytes() for a in (whole, *apart)))
            for root in range(n):
                digest.update(_gather_and_scatter(dist, dtype, rank, n, root, repeat))
    entries = [entry for entry in recorder.entries() if entry[fr.GROUP] == g.group_name]  # the latest calls
    wrong = [f"seq {entry[fr.SEQ]} is {entry[fr.STATE]}" for entry in entries if entry[fr.STATE] != fr.DONE_STATE]
    seqs = [entry[fr.SEQ] for entry in entries]
    if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        wrong.append(f"the recorded calls are not numbered one after the other: {seqs[:20]}...")
    return digest.hexdigest(), wrong


def _gather_and_scatter(dist, dtype: str, rank: int, n: int, root: int, repeat: int) -> bytes:
    """A gather and a scatter at `root`, each into (from) the chunks of one array and into (from) separate arrays,
    the two ways a lane takes a list (native/blocks.c): every byte that came out."""
    on_root = rank == root
    mine = _values(dtype, rank + repeat, 3)
    whole = np.zeros(3 * n, dtype=dtype)
    apart = [np.zeros(3, dtype=dtype) for _ in range(n)]
    dist.gather(mine, list(np.split(whole, n)) if on_root else None, dst=root)
    dist.gather(mine, apart if on_root else None, dst=root)
    blocks = [_values(dtype, 10 * root + r + repeat, 3) for r in range(n)]
    into_span, into_apart = np.zeros(3, dtype=dtype), np.zeros(3, dtype=dtype)
    dist.scatter(into_span, list(np.split(np.concatenate(blocks), n)) if on_root else None, src=root)
    dist.scatter(into_apart, tuple(blocks) if on_root else None, src=root)
    return b"".join(a.tobytes() for a in (whole, *apart, into_span, into_apart))


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_repeated_calls_on_lanes_give_the_python_paths_bytes_and_records(n: int) -> None:
    python_results, compiled_results = on_both_paths(n, repeat_every_laned_call, timeout=240)
    laned = ["all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all_single", "broadcast", "gather",
             "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter"]
    # on the compiled path, lanes ran calls of every collective they serve; on the Python path, none opened
    assert all(ran == {} and wrong == [] for ran, _, wrong in python_results)
    for ran, _, wrong in compiled_results:
        assert wrong == [] and sorted(ran) == laned and all(ran[name] > 10 for name in laned), (ran, wrong)
    assert [digest for _, digest, _ in compiled_results] == [digest for _, digest, _ in python_results]


def a_small_ring_of_laned_calls(_with_bfloat16: bool) -> tuple[list, bool, bool]:
    """Broadcasts recorded in a ring of 4 entries: (the ring's entries as a dump has them, less their times; whether
    the ring holds four entries, none the one read ten calls before, each ended once started, and the latest is the
    newest; whether a lane ran them)."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group, runtime
    from meshcomm.trace import flight_recorder as fr

    recorder, name = runtime().recorder, resolve_group(None).group_name
    x = np.ones(3, np.float32)

    def untimed(entry: list) -> dict:
        return {k: v for k, v in fr.describe(entry).items() if k not in ("started", "seconds")}

    for _ in range(3):
        dist.broadcast(x, src=0)
    kept = recorder.entries()[0]
    for _ in range(10):
        dist.broadcast(x, src=0)
    entries = recorder.entries()
    sound = (len(entries) == 4 and kept not in entries
             and all(entry[fr.ENDED] >= entry[fr.STARTED] for entry in entries)
             and recorder.latest(name) == entries[-1])
    laned = any(key[0] == "broadcast" for key in resolve_group(None).lanes)
    return [untimed(entry) for entry in entries], sound, laned


@needs_compiled
def test_a_lanes_calls_fill_a_small_flight_recorder_ring_as_the_python_paths_do() -> None:
    python_results, compiled_results = on_both_paths(2, a_small_ring_of_laned_calls, timeout=60,
                                                     env={"MESHCOMM_FLIGHT_RECORDER_SIZE": "4"})
    assert [result[:2] for result in compiled_results] == [result[:2] for result in python_results]
    assert all(result[2] for result in compiled_results) and not any(result[2] for result in python_results)
    for entries, sound, _ in compiled_results:
        assert sound and [entry["seq"] for entry in entries] == [9, 10, 11, 12], entries


def what_a_lane_leaves_to_the_face() -> list[str]:
    """Calls with a lane's key that it must not run itself; what came out otherwise than the whole path gives."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    total = n * (n + 1) / 2
    wrong = []
    for _ in range(2):
        x = np.full(4, rank + 1, np.float32)
        dist.all_reduce(x)
    if ("all_reduce", dist.ReduceOp.SUM, np.dtype(np.float32), (4,)) not in resolve_group(None).lanes:
        wrong.append("no lane after two calls of one shape")
    frozen = np.full(4, rank + 1, np.float32)
    frozen.flags.writeable = False
    try:
        dist.all_reduce(frozen)
        wrong.append("a read-only tensor was reduced")
    except ValueError as exc:
        if "tensor is read-only" not in str(exc):
            wrong.append(f"read-only: {exc}")
    if frozen.tolist() != [rank + 1] * 4:
        wrong.append(f"the read-only tensor changed: {frozen.tolist()}")
    parent = np.full((4, 2), rank + 1, np.float32)
    strided = parent[:, 0]  # the lane's dtype and shape, not its layout
    dist.all_reduce(strided)
    if parent[:, 0].tolist() != [total] * 4 or parent[:, 1].tolist() != [rank + 1] * 4:
        wrong.append(f"strided: {parent.tolist()}")
    queued = np.full(4, rank + 10, np.float32)
    work = dist.all_reduce(queued, async_op=True)
    after = np.full(4, rank + 1, np.float32)
    dist.all_reduce(after)  # behind the queued call, in issue order
    work.wait()
    if queued.tolist() != [total + 9 * n] * 4 or after.tolist() != [total] * 4:
        wrong.append(f"queued then blocking: {queued.tolist()} {after.tolist()}")
    for _ in range(2):
        kept = np.full(4, rank + 1, np.float32)
        kept.flags.writeable = rank == 0  # read-only where it is only read
        dist.reduce(kept, dst=0)
        if kept.tolist() != [total if rank == 0 else rank + 1] * 4:
            wrong.append(f"reduce to rank 0: {kept.tolist()}")
    for src in (0, n - 1, 0):
        y = np.full(4, rank, np.float32)
        dist.broadcast(y, src=src)
        if y.tolist() != [src] * 4:
            wrong.append(f"broadcast from {src}: {y.tolist()}")
    try:  # 0.0 is the key of src=0's lane, but it is not a rank
        dist.broadcast(np.full(4, rank, np.float32), src=0.0)
        wrong.append("broadcast from src=0.0 ran")
    except TypeError as exc:
        if "src must be an int" not in str(exc):
            wrong.append(f"src=0.0: {exc}")
    return wrong


@needs_compiled
def test_a_lane_leaves_what_it_cannot_vouch_for_to_the_faces_checks() -> None:
    with Cluster(2) as ranks:
        assert ranks.run(what_a_lane_leaves_to_the_face, timeout=60) == [[], []]


def lists_a_lane_leaves_to_the_face() -> list[str]:
    """Gathers and scatters to rank 0 with a lane's key but a list it must not take itself: the face's errors, or
    the whole path's bytes; what came out otherwise."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    wrong = []

    def gather(blocks) -> None:
        dist.gather(np.full(2, rank + 1, np.float32), blocks if rank == 0 else None, dst=0)

    def expect(error: type, words: str, call) -> None:
        try:
            call()
            wrong.append(f"no error for {words!r}")
        except error as exc:
            if words not in str(exc):
                wrong.append(f"{words!r}: {exc}")

    for _ in range(2):
        gather([np.zeros(2, np.float32) for _ in range(n)])
        dist.scatter(np.zeros(2, np.float32), [np.ones(2, np.float32)] * n if rank == 0 else None, src=0)
    if sorted(key[0] for key in resolve_group(None).lanes) != ["gather", "scatter"]:
        wrong.append(f"lanes: {list(resolve_group(None).lanes)}")
    if rank == 0:  # only the root reads a list; a failed check moves nothing, so rank 1 runs no call here
        expect(TypeError, "gather_list[1] and tensor: dtypes differ, int32 and float32",
               lambda: gather([np.zeros(2, np.float32), np.zeros(2, np.int32)]))
        frozen = np.zeros(2, np.float32)
        frozen.flags.writeable = False
        expect(ValueError, "gather_list[1] is read-only", lambda: gather([np.zeros(2, np.float32), frozen]))
        expect(ValueError, "gather_list must have one entry per rank", lambda: gather([np.zeros(2, np.float32)]))
        expect(ValueError, "gather_list[0] must have 2 elements",
               lambda: gather([np.zeros(4, np.float32), np.zeros(2, np.float32)]))
        expect(ValueError, "scatter_list[1] must have 2 elements", lambda: dist.scatter(
            np.zeros(2, np.float32), [np.ones(2, np.float32), np.ones(1, np.float32)], src=0))
    else:
        expect(ValueError, "gather_list must be given on the destination rank only",
               lambda: dist.gather(np.ones(2, np.float32), [np.zeros(2, np.float32)] * n, dst=0))
    parent = np.zeros((2, 2 * n), np.float32)
    gather([parent[:, 2 * r] for r in range(n)])  # blocks out of order: the face copies them back
    if rank == 0 and parent[:, ::2].T.tolist() != [[r + 1] * 2 for r in range(n)]:
        wrong.append(f"strided blocks: {parent.tolist()}")
    if np.any(parent[:, 1::2]):
        wrong.append(f"between the strided blocks: {parent.tolist()}")
    out = np.zeros(2, np.float32)
    dist.scatter(out, [np.arange(4, dtype=np.float32)[::2] + r for r in range(n)] if rank == 0 else None, src=0)
    if out.tolist() != [rank, rank + 2]:
        wrong.append(f"scatter of strided blocks: {out.tolist()}")
    for _ in range(2):
        dist.all_gather([np.zeros(2, np.float32) for _ in range(n)], np.full(2, rank, np.float32))
    uneven = [np.zeros(r + 1, np.float32) for r in range(n)]  # the lane's blocks are of one size
    dist.all_gather(uneven, np.full(rank + 1, rank, np.float32))
    if [block.tolist() for block in uneven] != [[r] * (r + 1) for r in range(n)]:
        wrong.append(f"uneven all_gather: {uneven}")
    # rank 1's call had the even lane's key, which declined it; rank 0's had its own, and got no lane
    if sum(key[0] == "all_gather" for key in resolve_group(None).lanes) != 1:
        wrong.append(f"all_gather lanes: {[key for key in resolve_group(None).lanes if key[0] == 'all_gather']}")
    for _ in range(2):
        dist.reduce_scatter(np.zeros(2, np.float32), [np.ones(2, np.float32) for _ in range(n)])
    swapped = [np.ones(2, np.dtype(np.float32).newbyteorder()) for _ in range(n)]  # float32 too, by name
    expect(TypeError, "input_list[0] and output: byte orders differ",
           lambda: dist.reduce_scatter(np.zeros(2, np.float32), swapped))
    return wrong


@needs_compiled
def test_a_lane_leaves_lists_it_cannot_take_to_the_faces_checks() -> None:
    with Cluster(2) as ranks:
        assert ranks.run(lists_a_lane_leaves_to_the_face, timeout=60) == [[], []]


def lists_in_place() -> tuple[list, list]:
    """Calls whose tensor is this rank's own block of the list, the chunks of one array, REPEATS times: what came
    out wrong, and the lanes that ran them."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    wrong = []
    for repeat in range(REPEATS):
        expected = [float(r + 10 * repeat) for r in range(n) for _ in range(4)]
        whole = np.zeros(4 * n, np.float32)
        chunks = np.split(whole, n)
        chunks[rank][...] = rank + 10 * repeat
        dist.all_gather(chunks, chunks[rank])
        if whole.tolist() != expected:
            wrong.append(f"all_gather: {whole.tolist()}")
        whole = np.zeros(4 * n, np.float32)
        chunks = np.split(whole, n)
        chunks[rank][...] = rank + 10 * repeat
        dist.gather(chunks[rank], chunks if rank == 0 else None, dst=0)
        if rank == 0 and whole.tolist() != expected:
            wrong.append(f"gather: {whole.tolist()}")
        whole = np.arange(4 * n, dtype=np.float32) + repeat
        chunks = np.split(whole, n)
        dist.scatter(chunks[rank], chunks if rank == 0 else None, src=0)
        if chunks[rank].tolist() != [float(4 * rank + k + repeat) for k in range(4)]:
            wrong.append(f"scatter: {chunks[rank].tolist()}")
        whole = np.arange(4 * n, dtype=np.float32) + repeat
        chunks = np.split(whole, n)
        dist.reduce_scatter(chunks[rank], chunks)
        if chunks[rank].tolist() != [float(n * (4 * rank + k + repeat)) for k in range(4)]:
            wrong.append(f"reduce_scatter: {chunks[rank].tolist()}")
    return wrong, sorted(key[0] for key in resolve_group(None).lanes)


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_a_lane_runs_a_list_whose_block_is_the_tensor(n: int) -> None:
    with Cluster(n) as ranks:
        results = ranks.run(lists_in_place, timeout=60)
    assert results == [([], ["all_gather", "gather", "reduce_scatter", "scatter"])] * n


def reduce_scatter_in_place_apart(with_bfloat16: bool) -> tuple[dict, str]:
    """In-place reduce_scatters whose blocks are separate arrays, of NaN pairs and signed zeros that the C code hands
    back to numpy (fallout), REPEATS times each: (how many lanes ran, a digest of every byte that came out)."""
    import meshcomm as dist
    from meshcomm import ReduceOp
    from meshcomm.group import lanes

    rank, n = dist.get_rank(), dist.get_world_size()
    ran: dict = {}
    open_lane = counting_lane_runs(ran)
    digest = hashlib.sha256()
    try:
        for op in (ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX):
            for repeat in range(REPEATS):
                blocks = [_pairs("float32", rank + block + repeat, 9) for block in range(n)]
                dist.reduce_scatter(blocks[rank], blocks, op=op)
                digest.update(b"".join(block.tobytes() for block in blocks))
    finally:
        lanes.open_lane = open_lane
    return ran, digest.hexdigest()


@needs_compiled
def test_an_in_place_reduce_scatter_numpy_finishes_reads_what_was_posted() -> None:
    python_results, compiled_results = on_both_paths(2, reduce_scatter_in_place_apart, timeout=120)
    assert all(ran.get("reduce_scatter", 0) > 0 for ran, _ in compiled_results), compiled_results
    assert [digest for _, digest in compiled_results] == [digest for _, digest in python_results]


def call_otherwise_on_a_lane(first: str, second: str) -> list:
    """Both ranks have lanes for a `first` and a `second` call of one shape (rank 0 the root of rooted ones, its
    list of blocks separate arrays); then rank 1 makes the second where rank 0 makes the first. Returns (the
    error's type and message, the recorder's state for that call)."""
    import meshcomm as dist
    from meshcomm.api.state import runtime
    from meshcomm.trace import flight_recorder as fr

    rank, n = dist.get_rank(), dist.get_world_size()

    def blocks():
        return [np.ones(4, np.float32) for _ in range(n)] if rank == 0 else None

    calls = {"all_reduce": lambda: dist.all_reduce(np.ones(4, np.float32)),
             "broadcast": lambda: dist.broadcast(np.ones(4, np.float32), src=0),
             "gather": lambda: dist.gather(np.ones(4, np.float32), blocks(), dst=0),
             "scatter": lambda: dist.scatter(np.ones(4, np.float32), blocks(), src=0)}
    for _ in range(REPEATS):
        calls[first]()
        calls[second]()
    try:
        calls[first if rank == 0 else second]()
    except Exception as exc:
        return [type(exc).__name__, str(exc), runtime().recorder.entries()[-1][fr.STATE]]
    return ["no error"]


@needs_compiled
@pytest.mark.parametrize("first, second", [("all_reduce", "broadcast"), ("gather", "scatter")])
def test_another_call_on_a_lane_is_named_as_on_the_whole_path(first: str, second: str) -> None:
    with Cluster(2) as ranks:
        outcomes = ranks.run(call_otherwise_on_a_lane, first, second, timeout=90)
    for rank, (kind, message, state) in enumerate(outcomes):
        assert kind == "CollectiveMismatchError", (rank, message)
        assert first in message and second in message and f"at seq {2 * REPEATS}" in message, message
        assert state == "failed"


@pytest.mark.parametrize("path", ["python", "compiled"])
def test_a_call_run_at_once_takes_a_number_only_when_nothing_is_queued(path: str) -> None:
    from meshcomm.group.turns import Turns

    if path == "compiled" and native.core is None:
        pytest.skip("the compiled path is not active (not built, or MESHCOMM_NATIVE=0)")
    turns = Turns() if path == "python" else native.core.Turns()
    assert turns.take_now() == 0
    assert turns.take(True) == (1, True)
    assert turns.take(False) == (2, True)  # behind the queued call
    assert turns.take_now() is None and (turns.next, turns.pending) == (3, 2)
    turns.done()
    turns.done()
    assert turns.take_now() == 3 and (turns.next, turns.pending) == (4, 0)


def torch_tensors_beside_numpy_arrays() -> tuple[dict, list[str]]:
    """Every laned call on CPU torch tensors, REPEATS times, each after the same call on numpy arrays of the same
    values: (how many of the torch calls of each collective lanes ran, where the two gave other bytes)."""
    import torch

    import meshcomm as dist
    from meshcomm.group import lanes
    from meshcomm.api.state import resolve_group
    from tests.api.test_message_lanes import CountingLanes

    rank, n = dist.get_rank(), dist.get_world_size()
    ran: dict = {}
    torch_ran: dict = {}
    open_lane = counting_lane_runs(ran)
    wrong = []

    world = resolve_group(None)
    world.lanes = CountingLanes()  # and counts the sends' and receives' lanes

    def lane_runs(name: str) -> int:
        return sum(world.lanes.ran.values()) if name == "send/recv" else ran.get(name, 0)

    def both(name, call, *arrays):
        """call(*arrays) on numpy copies, then on torch copies (counting lane runs of `name`); outputs compared."""
        mine = [a.copy() for a in arrays]
        call(*mine)
        before = lane_runs(name)
        tensors = [torch.from_numpy(a.copy()) for a in arrays]
        call(*tensors)
        torch_ran[name] = torch_ran.get(name, 0) + lane_runs(name) - before
        if any(t.numpy().tobytes() != a.tobytes() for t, a in zip(tensors, mine)):
            wrong.append(f"{name}: {[t.tolist() for t in tensors]} != {[a.tolist() for a in mine]}")

    def chunks(whole, every_rank: bool = False):
        """The chunks of `whole`, numpy or torch: a list of rank 0's gather or scatter, or every rank's."""
        if rank != 0 and not every_rank:
            return None
        return np.split(whole, n) if type(whole) is np.ndarray else list(whole.chunk(n))

    try:
        for repeat in range(REPEATS):
            x = _values("float32", rank + repeat, 5)
            both("all_reduce", lambda t: dist.all_reduce(t), x)
            both("broadcast", lambda t: dist.broadcast(t, src=n - 1), x)
            both("reduce", lambda t: dist.reduce(t, dst=0), x)
            both("all_gather_into_tensor", lambda o, i: dist.all_gather_into_tensor(o, i), np.empty(5 * n, np.float32),
                 x)
            both("reduce_scatter_tensor", lambda o, i: dist.reduce_scatter_tensor(o, i), np.empty(5, np.float32),
                 _values("float32", rank + repeat, 5 * n))
            both("all_to_all_single", lambda o, i: dist.all_to_all_single(o, i), np.empty(3 * n, np.int64),
                 _values("int64", rank + repeat, 3 * n))
            if rank < 2:
                both("send/recv", lambda t: dist.send(t, 1) if rank == 0 else dist.recv(t, 0), x)
            both("all_gather", lambda t, whole: dist.all_gather(chunks(whole, every_rank=True), t), x,
                 np.zeros(5 * n, np.float32))
            both("reduce_scatter", lambda t, whole: dist.reduce_scatter(t, chunks(whole, every_rank=True)),
                 np.zeros(5, np.float32), _values("float32", rank + repeat, 5 * n))
            both("gather", lambda t, whole: dist.gather(t, chunks(whole)), x, np.zeros(5 * n, np.float32))
            both("scatter", lambda t, whole: dist.scatter(t, chunks(whole)),
                 np.zeros(5, np.float32), _values("float32", repeat, 5 * n))
        # a tensor that tracks gradients runs on its detached view's lane; strided and bfloat16 ones take the
        # whole path: the same sums either way
        grad = torch.ones(4, requires_grad=True)
        for _ in range(REPEATS):
            with torch.no_grad():
                dist.all_reduce(grad)
        if grad.detach().tolist() != [n ** REPEATS] * 4:
            wrong.append(f"requires_grad: {grad.tolist()}")
        parent = torch.ones(4, 2)
        dist.all_reduce(parent[:, 0])
        if parent[:, 0].tolist() != [n] * 4 or parent[:, 1].tolist() != [1] * 4:
            wrong.append(f"strided: {parent.tolist()}")
        half = torch.ones(3, dtype=torch.bfloat16)
        dist.all_reduce(half)
        if half.float().tolist() != [n] * 3:
            wrong.append(f"bfloat16: {half.tolist()}")
    finally:
        lanes.open_lane = open_lane
    return torch_ran, wrong


@needs_compiled
def test_cpu_torch_tensors_run_on_the_lanes_of_their_numpy_view() -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    # A receive's lane waits its spin window for the message: long enough here that a late sender still makes it.
    with Cluster(2, env={"MESHCOMM_SPIN_US": "2000000"}) as ranks:
        results = ranks.run(torch_tensors_beside_numpy_arrays, timeout=90)
    for rank, (ran, wrong) in enumerate(results):
        assert wrong == [], wrong
        # The numpy calls made the lanes; every torch call of the same shape ran on them.
        assert ran == dict.fromkeys(("all_reduce", "broadcast", "reduce", "all_gather_into_tensor",
                                     "reduce_scatter_tensor", "all_to_all_single", "send/recv", "all_gather",
                                     "reduce_scatter", "gather", "scatter"), REPEATS), ran


def lanes_after_repeated_calls() -> list:
    """The world's lane keys after repeated blocking calls that lanes serve, and whether their results held."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    right = True
    for _ in range(REPEATS):
        x = np.ones(4, np.float32)
        dist.all_reduce(x)
        y = np.full(2, rank, np.int64)
        if rank == 0:
            dist.send(y, 1)
        elif rank == 1:
            dist.recv(y, 0)
        right = right and x.tolist() == [n] * 4 and y.tolist() == [0 if rank < 2 else rank] * 2
    return [sorted(key[0] for key in resolve_group(None).lanes), right]


@needs_compiled
def test_meshcomm_lanes_0_turns_the_lanes_off() -> None:
    with Cluster(2, env={"MESHCOMM_LANES": "0"}) as ranks:
        assert ranks.run(lanes_after_repeated_calls, timeout=60) == [[[], True], [[], True]]
    with Cluster(2) as ranks:
        assert ranks.run(lanes_after_repeated_calls, timeout=60) == [[["all_reduce", "send"], True],
                                                                     [["all_reduce", "recv"], True]]


def laned_calls_after_an_abort() -> list:
    """Broadcasts and sends that lanes run, then rank 0 aborts: (the world's lane keys, and what a broadcast and then
    a send or receive of the same shapes raise on this rank). Lanes read the abort from the transport's dict."""
    import meshcomm as dist
    from meshcomm.api.state import resolve_group, runtime

    rank = dist.get_rank()
    x, y = np.ones(3, np.float32), np.ones(2, np.int64)
    for _ in range(REPEATS):
        dist.broadcast(x, src=0)
        dist.send(y, 1) if rank == 0 else dist.recv(y, 0)
    keys = sorted(key[0] for key in resolve_group(None).lanes)
    dist.barrier()
    if rank == 0:
        dist.abort("stopping here")
    outcomes = []
    for call in (lambda: dist.broadcast(x, src=0), lambda: dist.send(y, 1) if rank == 0 else dist.recv(y, 0)):
        try:
            call()
            outcomes.append("ran")
        except Exception as exc:
            outcomes.append(type(exc).__name__)
    assert runtime().transport.aborted is not None
    return [keys, *outcomes]


@needs_compiled
def test_a_lane_declines_once_its_transport_is_aborted() -> None:
    with Cluster(2, env={"MESHCOMM_TIMEOUT": "30"}) as ranks:
        results = ranks.run(laned_calls_after_an_abort, timeout=90)
    assert results == [[["broadcast", "send"], "AbortedError", "AbortedError"],
                       [["broadcast", "recv"], "AbortedError", "AbortedError"]], results

"""The compiled per-call path (meshcomm/native/_core.c) gives the pure-Python path's results, byte for byte."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from meshcomm import native
from tests.marks import needs_compiled
from tests.ranks import Cluster



def _compiler() -> str | None:
    import shlex
    import shutil
    import sysconfig

    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"  # the compiler the build used
    return shutil.which(shlex.split(command)[0])


def test_the_extension_is_built_wherever_a_compiler_and_the_headers_are() -> None:
    import sysconfig

    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    if _compiler() is None or not headers:
        assert "pure Python" in native.describe()
        return
    assert native._built is not None, native.describe()
    assert native.describe().startswith("compiled") or os.environ.get("MESHCOMM_NATIVE") == "0"

_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _values(dtype: str, rank: int, count: int) -> np.ndarray:
    """Values that test the edges: signed zeros, NaN, infinities, subnormals, overflow, wrap-around."""
    rng = np.random.default_rng(1000 + rank)
    if dtype == "bool":
        return rng.integers(0, 2, count).astype(bool)
    if dtype in _INTS:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    if dtype == "bfloat16":
        import ml_dtypes

        bits = rng.integers(0, 1 << 16, count, dtype=np.uint16)
        bits[: min(count, 4)] = [0x8000, 0x0000, 0x7F80, 0x0001][:count]  # -0, 0, inf, a subnormal
        return bits.view(ml_dtypes.bfloat16)
    kind = np.dtype(dtype)
    values = (rng.standard_normal(count) * 10.0 ** rng.integers(-6, 6, count)).astype(kind)
    edges = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, np.finfo(kind).max, np.finfo(kind).tiny / 3,
                      -np.finfo(kind).max], dtype=kind)
    head = values[rank % 3 :]
    head[: min(len(edges), len(head))] = edges[: len(head)]
    return values


def _pairs(dtype: str, rank: int, count: int) -> np.ndarray:
    """NaNs of another sign and payload on each rank at every third element, zeros of another sign at the next."""
    kind = np.dtype(dtype)
    values = (np.arange(count) % 7 - 3.0).astype(kind)
    bits = values.view(f"u{kind.itemsize}")
    width = 8 * kind.itemsize
    quiet = {16: 0x7E00, 32: 0x7FC00000, 64: 0x7FF8000000000000}[width]
    sign = 1 << (width - 1)
    bits[0::3] = quiet + rank if rank % 2 == 0 else sign | quiet | rank  # NaN + NaN: which one numpy keeps
    bits[1::3] = sign if rank % 2 else 0  # -0.0 beside 0.0: which one numpy's min and max keep
    return values


def run_everything(with_bfloat16: bool) -> tuple[int, int, str]:
    """Every collective the board runs, on every dtype and op it serves; (plans on the compiled path, plans on the
    board, a digest of every byte)."""
    import meshcomm as dist
    from meshcomm import ReduceOp
    from meshcomm.api.state import resolve_group

    g = resolve_group(None)
    rank, n = g.rank, g.size
    digest = hashlib.sha256()
    ops = {"sum": ReduceOp.SUM, "product": ReduceOp.PRODUCT, "min": ReduceOp.MIN, "max": ReduceOp.MAX,
           "band": ReduceOp.BAND, "bor": ReduceOp.BOR, "bxor": ReduceOp.BXOR, "avg": ReduceOp.AVG}
    dtypes = ("bool", *_INTS, *_FLOATS, *(("bfloat16",) if with_bfloat16 else ()))
    for dtype in dtypes:
        floating = dtype in _FLOATS or dtype == "bfloat16"
        for name, op in ops.items():
            if (floating and name in ("band", "bor", "bxor")) or (name == "avg" and not floating):
                continue
            for count in (1, 7, 513):
                x = _values(dtype, rank, count)
                dist.all_reduce(x, op=op, algorithm="direct")
                digest.update(x.tobytes())
                y = _values(dtype, rank, count)
                dist.reduce(y, dst=n - 1, op=op, algorithm="direct")
                digest.update(y.tobytes())
                z = np.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(z, np.concatenate([_values(dtype, rank + r, count) for r in range(n)]),
                                           op=op, algorithm="direct")
                digest.update(z.tobytes())
    for dtype in ("uint8", "float64", "complex64"):
        x = (np.arange(9) * 3 + rank).astype(dtype)
        dist.broadcast(x, src=n - 1, algorithm="direct")
        digest.update(x.tobytes())
        gathered = [np.empty(3 + r, dtype=dtype) for r in range(n)]
        dist.all_gather(gathered, x[: 3 + rank], algorithm="direct")
        digest.update(b"".join(v.tobytes() for v in gathered))
        out = np.empty(4 * n, dtype=dtype)
        dist.all_to_all_single(out, (np.arange(4 * n) + 10 * rank).astype(dtype), algorithm="direct")
        digest.update(out.tobytes())
        inplace = (np.arange(4 * n) * 7 + rank).astype(dtype)
        dist.all_to_all_single(inplace, inplace, algorithm="direct")
        digest.update(inplace.tobytes())
        for root in range(n):
            blocks = [np.empty(5, dtype=dtype) for _ in range(n)] if rank == root else None
            dist.gather((np.arange(5) * 2 + rank).astype(dtype), blocks, dst=root, algorithm="direct")
            digest.update(b"".join(v.tobytes() for v in blocks or []))
            mine = np.empty(5, dtype=dtype)
            parts = [(np.arange(5) + 9 * q + root).astype(dtype) for q in range(n)] if rank == root else None
            dist.scatter(mine, parts, src=root, algorithm="direct")
            digest.update(mine.tobytes())
    for dtype in _FLOATS:
        for name in ("sum", "product", "min", "max"):
            for count in (1, 9, 17, 33, 513):  # numpy's vector and scalar loops differ on these pairs
                x = _pairs(dtype, rank, count)
                dist.all_reduce(x, op=ops[name], algorithm="direct")
                digest.update(x.tobytes())
    for dtype in (">i4", ">f8", ">u2"):  # another byte order, under the same dtype names
        x = (np.arange(5) * 3 + rank + 250).astype(dtype)
        dist.all_reduce(x, algorithm="direct")
        digest.update(x.tobytes())
    dist.barrier(algorithm="direct")
    plans = [plan.board for plan in g._plans.values() if plan.board is not None]
    return sum(plan.native is not None for plan in plans), len(plans), digest.hexdigest()


def on_both_paths(n: int, fn, timeout: float, env: dict[str, str] | None = None) -> tuple[list, list]:
    """fn(with_bfloat16) on n fresh ranks of the pure-Python path, then of the compiled path, with `env`: their
    results. bfloat16 is in when this interpreter can import ml_dtypes."""
    try:
        import ml_dtypes  # noqa: F401

        with_bfloat16 = True
    except ImportError:
        with_bfloat16 = False
    with Cluster(n, env={**(env or {}), "MESHCOMM_NATIVE": "0"}) as python_path:
        python_results = python_path.run(fn, with_bfloat16, timeout=timeout)
    with Cluster(n, env=env) as compiled_path:
        compiled_results = compiled_path.run(fn, with_bfloat16, timeout=timeout)
    return python_results, compiled_results


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_the_compiled_and_python_paths_give_the_same_bytes(n: int) -> None:
    python_results, compiled_results = on_both_paths(n, run_everything, timeout=120)
    assert all(compiled == 0 and on_board > 50 for compiled, on_board, _ in python_results)
    # every call of the run fits in slots and is served by the compiled path
    assert all(compiled == on_board > 50 for compiled, on_board, _ in compiled_results)
    assert [digest for _, _, digest in compiled_results] == [digest for _, _, digest in python_results]


def run_by_reference(with_bfloat16: bool) -> tuple[dict, str]:
    """Calls with posts larger than a board slot, which go by reference (staged, and larger than the staging
    area): some members' posts in slots beside others' by reference, in place and not; and the two-shot
    all-reduce, always by reference. ((collective, algorithm) -> whether its plans are on the compiled path, a
    digest)."""
    import meshcomm as dist
    from meshcomm import ReduceOp
    from meshcomm.api.state import resolve_group
    from meshcomm.board.run import (_PIECE_BYTES, SLOT_BYTES, STAGE_FROM_BYTES, STAGE_TO_BYTES,
                                    STAGED_TWO_SHOT_FROM)

    g = resolve_group(None)
    rank, n = g.rank, g.size
    digest = hashlib.sha256()
    # int64s: more than a slot holds; enough that posts by reference are staged; more than they stage
    for large in (SLOT_BYTES // 8 + 3, STAGE_FROM_BYTES // 8 + 3, STAGE_TO_BYTES // 8 + 3):
        for root in range(n):
            x = (np.arange(large) * 3 + rank).astype(np.int64)
            dist.broadcast(x, src=root, algorithm="direct")
            digest.update(x.tobytes())
        counts = [5 if r == 0 else large + r for r in range(n)]  # member 0 posts in its slot, the others not
        gathered = [np.empty(c, np.int64) for c in counts]
        dist.all_gather(gathered, (np.arange(counts[rank]) + 100 * rank).astype(np.int64), algorithm="direct")
        digest.update(b"".join(v.tobytes() for v in gathered))
        whole = np.zeros(n * large, np.int64)
        whole[rank * large : (rank + 1) * large] = np.arange(large) * (rank + 2)
        dist.all_gather_into_tensor(whole, whole[rank * large : (rank + 1) * large], algorithm="direct")
        digest.update(whole.tobytes())
        source = (np.arange(n * large) * 5 + rank).astype(np.int64)
        out = np.empty(n * large, np.int64)
        dist.all_to_all_single(out, source, algorithm="direct")
        digest.update(out.tobytes() + source.tobytes())
        dist.all_to_all_single(source, source, algorithm="direct")  # in place: read from what it overwrites
        digest.update(source.tobytes())
        y = (np.arange(large) % 7 + rank).astype(np.int64)
        dist.all_reduce(y, algorithm="direct")  # a direct reduction by reference, in place
        digest.update(y.tobytes())
        # in place, and reading every member's block: a NaN pair at its end leaves the whole to numpy (settle)
        z = (np.arange(n * large) % 5 - 2.5 * rank).astype(np.float64)
        z[-1] = np.nan
        dist.reduce_scatter_tensor(z[rank * large : (rank + 1) * large], z, algorithm="direct")
        digest.update(z.tobytes())
        for root in range(n):
            w = (np.arange(large) % 9 * (rank + 1)).astype(np.float32)
            dist.reduce(w, dst=root, op=ReduceOp.MAX, algorithm="direct")
            digest.update(w.tobytes())
        for root in range(n):
            whole = np.full(n * large, -1, np.int64)
            blocks = [whole[q * large : (q + 1) * large] for q in range(n)]  # one span: the output itself
            # the root's tensor is another member's block of its list: read before that block is written
            mine = blocks[(root + 1) % n] if rank == root else np.empty(large, np.int64)
            mine[...] = np.arange(large) * 3 + rank
            dist.gather(mine, blocks if rank == root else None, dst=root, algorithm="direct")
            digest.update(whole.tobytes())
            parts = (np.arange(n * large) * 7 + root).astype(np.int64)
            # in place on the root: its tensor is its own block of the list
            out = parts[rank * large : (rank + 1) * large] if rank == root else np.empty(large, np.int64)
            listed = [parts[q * large : (q + 1) * large] for q in range(n)] if rank == root else None
            dist.scatter(out, listed, src=root, algorithm="direct")
            digest.update(out.tobytes() + parts.tobytes())
    # The two-shot all-reduce, as large as it goes unstaged with a core per rank (below STAGED_TWO_SHOT_FROM): on 2
    # ranks each block two pieces long. A NaN pair (a sum) or signed zeros (max, min) in the second piece of the
    # call (member 0's block, reduced in place, on 2 ranks) and in the last piece of the last block: the compiled
    # path leaves that piece and the rest to numpy. Then the same through the staging areas, where it leaves them
    # to numpy too (as where ranks outnumber cores, it does both sizes).
    for size in (STAGED_TWO_SHOT_FROM - 1, STAGED_TWO_SHOT_FROM):
        for dtype, op, odd in (("float64", ReduceOp.SUM, np.nan), ("float32", ReduceOp.MAX, -0.0 if rank else 0.0),
                               ("float16", ReduceOp.SUM, np.nan), ("int32", ReduceOp.PRODUCT, None),
                               ("float64", ReduceOp.MIN, None)):
            itemsize = np.dtype(dtype).itemsize
            count = size // itemsize - 13 * (size < STAGED_TWO_SHOT_FROM)
            z = ((np.arange(count) % 11 - 5) * (rank + 1)).astype(dtype)
            if odd is not None:
                z[-3] = z[_PIECE_BYTES // itemsize + 7] = odd
            dist.all_reduce(z, op=op, algorithm="two_shot")
            digest.update(z.tobytes())
    compiled = {}
    for plan in g._plans.values():
        if plan.board is not None and (plan.board.some_by_reference or plan.algorithm == "two_shot"):
            key = (plan.board.problem.collective, plan.algorithm) + (("pushed",) if plan.board.pushes else ())
            key += ("staged",) if plan.board.stages_two_shot else ()
            compiled[key] = compiled.get(key, True) and plan.board.native is not None
    return compiled, digest.hexdigest()


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_posts_by_reference_give_the_same_bytes_on_both_paths(n: int) -> None:
    python_results, compiled_results = on_both_paths(n, run_by_reference, timeout=120)
    assert all(not any(compiled.values()) for compiled, _ in python_results)
    # The compiled path takes every call by reference except the pushed gather, whose members write into the
    # root's output in Python; a gather staged where ranks outnumber cores is its own.
    expected = {("broadcast", "direct"): True, ("all_gather", "direct"): True, ("all_to_all", "direct"): True,
                ("all_reduce", "direct"): True, ("reduce_scatter", "direct"): True, ("reduce", "direct"): True,
                ("all_reduce", "two_shot"): True, ("gather", "direct", "pushed"): False,
                ("scatter", "direct"): True, ("all_reduce", "two_shot", "staged"): True}
    crowded = n > (os.cpu_count() or 1)
    if crowded:  # blocks of a slot to 1 MiB among up to 4 ranks; and every two-shot all-reduce of the run staged
        expected[("gather", "direct")] = True
        del expected[("all_reduce", "two_shot")]
    assert all(compiled == expected for compiled, _ in compiled_results), compiled_results
    assert [digest for _, digest in compiled_results] == [digest for _, digest in python_results]


def _gather_by_reference(me: int):
    """The compiled plan of member `me` for a 2-member all_gather of 40 int64s each: on a board of 256-byte slots
    both post by reference."""
    from meshcomm.algorithms.problem import problem_of
    from meshcomm.board import run as board_run

    problem = problem_of("all_gather", 2, (40, 40))
    plan = board_run.plan(problem, me, 8, "direct", "int64", "none", bytes(range(16)))
    return board_run.native_plan(plan._replace(some_by_reference=True, by_reference=True), 8, "int64", "none",
                                 bytes(range(16)))


@needs_compiled
@pytest.mark.parametrize("verdict", ["gone", "silent"])
def test_a_compiled_read_of_a_poster_s_memory_that_fails_asks_after_it_and_names_it(two_boards, verdict) -> None:
    # Member 1 posted by reference and died: reading its memory fails, so the call asks the liveness check about
    # it until the deadline, as the Python path does.
    import subprocess
    import time

    gone = subprocess.Popen(["true"])
    gone.wait()
    theirs = np.arange(40, dtype=np.int64)
    two_boards[1].post(1, 0, bytes(range(16)), memoryview(theirs).cast("B"), 0.0, float("inf"),
                       lambda missing: None, by_reference=True)
    two_boards[1]._references[1][two_boards[1]._turns.current][0] = gone.pid
    asked = []

    def between(missing) -> None:
        asked.append(list(missing))
        if verdict == "gone":
            raise ConnectionError("member 1 is gone")

    mine, output = np.zeros(40, np.int64), np.zeros(80, np.int64)
    if verdict == "gone":
        with pytest.raises(ConnectionError, match="member 1 is gone"):
            two_boards[0].native.run(_gather_by_reference(0), 0, mine, output, 0.0, time.monotonic() + 30, between)
    else:
        with pytest.raises(TimeoutError, match="could not reach member 1's memory for its post"):
            two_boards[0].native.run(_gather_by_reference(0), 0, mine, output, 0.0, time.monotonic() + 0.2, between)
    assert asked and all(missing == [1] for missing in asked)


@needs_compiled
def test_a_compiled_call_reads_a_staged_post_out_of_the_staging_area_and_stages_its_own(monkeypatch) -> None:
    import time

    from meshcomm.board import run as board_run
    from meshcomm.board.segment import Board
    from meshcomm.transport.shm import DIRECTORY

    monkeypatch.setattr(board_run, "STAGE_FROM_BYTES", 320)  # the compiled plan's smallest staged post
    path = os.path.join(DIRECTORY, f"meshcomm-test-staged-native-board-{os.getpid()}")
    boards = [Board(path, 2, 256, create=member == 0, slots=3, stage_bytes=320) for member in range(2)]
    boards[0].unlink()
    try:
        theirs = np.arange(40, dtype=np.int64) + 100  # 320 bytes: more than a slot, as much as a staging area
        boards[1].post(1, 0, bytes(range(16)), memoryview(theirs).cast("B"), 0.0, float("inf"),
                       lambda missing: None, by_reference=True, stage_from=320)
        theirs[:] = 0  # staged by the Python path: the compiled reader must not find this
        boards[1].finish(1, 0)  # member 1 has read member 0's post, as it will have once it returns
        mine, output = np.arange(40, dtype=np.int64), np.zeros(80, np.int64)
        boards[0].native.run(_gather_by_reference(0), 0, mine, output, 0.0, time.monotonic() + 30,
                             lambda missing: pytest.fail(f"waited for {missing}"))
        assert output.tolist() == list(range(40)) + list(range(100, 140))
        assert boards[1]._references[0][0][1] == 0  # member 0's post (its first call: slot 0) says "staged"
        assert bytes(boards[1]._stages[0]) == mine.tobytes()
        monkeypatch.setattr(board_run, "STAGE_FROM_BYTES", 321)  # above the post: both leave theirs where they are
        boards[1].post(1, 1, bytes(range(16)), memoryview(theirs).cast("B"), 0.0, float("inf"),
                       lambda missing: None, by_reference=True, stage_from=321)
        boards[1].finish(1, 1)
        boards[0].native.run(_gather_by_reference(0), 1, mine + 1, output, 0.0, time.monotonic() + 30,
                             lambda missing: pytest.fail(f"waited for {missing}"))
        assert output.tolist() == list(range(1, 41)) + [0] * 40  # member 1's zeros, read where they are
        assert boards[1]._references[0][1][1] != 0 and boards[1]._references[1][1][1] != 0  # slot 1: not staged
        assert bytes(boards[1]._stages[0]) == mine.tobytes()  # the area still holds the first call's post
    finally:
        for board in boards:
            board.close()


@needs_compiled
def test_a_compiled_post_goes_by_reference_where_the_plan_says_though_it_would_fit_a_slot(two_boards) -> None:
    # A broadcast's or scatter's post of 256 to 512 KiB fits a slot but goes by reference (board/run.py's
    # slot_post_bytes): the compiled path posts as the plan says, not by the slot's size. Here 128 bytes in slots
    # of 256.
    import time

    from meshcomm.algorithms.problem import problem_of
    from meshcomm.board import run as board_run

    problem = problem_of("all_gather", 2, (16, 16))
    plan = board_run.plan(problem, 0, 8, "direct", "int64", "none", bytes(range(16)))
    assert not plan.by_reference
    by_reference = board_run.native_plan(plan._replace(some_by_reference=True, by_reference=True), 8, "int64",
                                         "none", bytes(range(16)))
    theirs = np.arange(16, dtype=np.int64) + 100
    two_boards[1].post(1, 0, bytes(range(16)), memoryview(theirs).cast("B"), 0.0, float("inf"),
                       lambda missing: None, by_reference=True)
    two_boards[1].finish(1, 0)  # member 1 has read member 0's post, as it will have once it returns
    mine, output = np.arange(16, dtype=np.int64), np.zeros(32, np.int64)
    two_boards[0].native.run(by_reference, 0, mine, output, 0.0, time.monotonic() + 30,
                             lambda missing: pytest.fail(f"waited for {missing}"))
    assert output.tolist() == list(range(16)) + list(range(100, 116))
    assert two_boards[1].by_reference(0, 0)


def _plan_for_two(me: int):
    """The compiled plan of member `me` for a 2-member all_reduce of 2 int64s on the board."""
    from meshcomm.algorithms.problem import problem_of
    from meshcomm.board import run as board_run

    problem = problem_of("all_reduce", 2, (2,))
    return board_run.plan(problem, me, 8, "direct", "int64", "sum", bytes(range(16))).native


@pytest.fixture
def two_boards():

    from meshcomm.board.segment import Board
    from meshcomm.transport.shm import DIRECTORY

    path = os.path.join(DIRECTORY, f"meshcomm-test-native-board-{os.getpid()}")
    members = [Board(path, 2, 256, create=member == 0, slots=3) for member in range(2)]
    members[0].unlink()
    yield members
    for board in members:
        board.close()


@needs_compiled
def test_a_compiled_call_computes_what_two_members_posted(two_boards) -> None:
    import threading

    plans = [_plan_for_two(0), _plan_for_two(1)]
    values = [np.array([1, 2], dtype=np.int64), np.array([10, 20], dtype=np.int64)]
    errors = []

    def member(m: int) -> None:
        try:
            for seq in range(5):  # more calls than slots: slots are reused
                two_boards[m].native.run(plans[m], seq, values[m], values[m], 1e-3, float("inf"), lambda missing: None)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(m,)) for m in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and not any(thread.is_alive() for thread in threads)
    # each call doubles the sum of the two: [11, 22] after the first, times 2 after each of the 4 others
    assert values[0].tolist() == values[1].tolist() == [11 * 16, 22 * 16]


@needs_compiled
def test_a_compiled_wait_asks_between_looks_and_times_out_naming_the_missing(two_boards) -> None:
    import time

    asked = []
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"members \[1\] of the board had not posted"):
        two_boards[0].native.run(_plan_for_two(0), 0, np.ones(2, np.int64), np.ones(2, np.int64), 0.0,
                                 time.monotonic() + 0.3, asked.append)
    assert asked and all(missing == [1] for missing in asked)
    assert time.monotonic() - started < 10  # bounded by its deadline, not hung


@needs_compiled
def test_a_board_closed_under_a_waiting_call_fails_the_call_instead_of_reading_freed_memory(two_boards) -> None:
    import threading
    import time

    outcome = []

    def wait_for_a_member_that_never_posts() -> None:
        try:
            two_boards[0].native.run(_plan_for_two(0), 0, np.ones(2, np.int64), np.ones(2, np.int64), 0.0,
                                     time.monotonic() + 60, lambda missing: None)
            outcome.append("returned")
        except RuntimeError as exc:
            outcome.append(str(exc))

    waiter = threading.Thread(target=wait_for_a_member_that_never_posts)
    waiter.start()
    time.sleep(0.2)
    two_boards[0].close()  # as destroy_process_group does, from another thread
    waiter.join(30)
    assert not waiter.is_alive()
    assert outcome == ["the group's board was closed while a call waited on it"]
    with pytest.raises(RuntimeError, match="the group's board is closed"):
        two_boards[0].native.run(_plan_for_two(0), 1, np.ones(2, np.int64), np.ones(2, np.int64), 0.0,
                                 time.monotonic() + 1, lambda missing: None)


@needs_compiled
@pytest.mark.parametrize("raised, propagates", [(RuntimeError, False), (KeyboardInterrupt, True)])
def test_a_member_that_posts_as_the_liveness_check_fails_it_still_counts_but_an_interrupt_is_raised(
        two_boards, raised, propagates) -> None:
    # `between` says member 1 is gone, but member 1 posted meanwhile: the call stands, as on the Python path.
    # An interrupt (Ctrl-C) is not a verdict on member 1: it is never swallowed.
    import time

    def between(missing) -> None:
        two_boards[1].post(1, 0, bytes(range(16)), memoryview(np.ones(2, np.int64)).cast("B"), 0.0,
                           float("inf"), lambda missing: None)
        raise raised("member 1 looked gone")

    x = np.ones(2, np.int64)
    if propagates:
        with pytest.raises(raised):
            two_boards[0].native.run(_plan_for_two(0), 0, x, x, 0.0, time.monotonic() + 30, between)
    else:
        assert two_boards[0].native.run(_plan_for_two(0), 0, x, x, 0.0, time.monotonic() + 30, between) is None
        assert x.tolist() == [2, 2]


@needs_compiled
@pytest.mark.parametrize("n", [2, 3])
def test_ranks_on_different_paths_share_one_board(n: int) -> None:
    from pathlib import Path

    from tests.ranks import run_program

    program = Path(__file__).with_name("mixed_paths_program.py")
    exits = run_program(program, n, timeout=90, per_rank=lambda rank: {"MESHCOMM_NATIVE": str(rank % 2)})
    lines = []
    for rank, done in enumerate(exits):
        assert done.returncode == 0, f"rank {rank}: {done.stderr[-2000:]}"
        lines += [line.split() for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert sorted(path for _, _, path, _ in lines) == sorted("compiled" if r % 2 else "python" for r in range(n))
    # all_gather's inputs differ by rank, but what every rank gathers is the same; as is every all_reduce
    digests = {digest for _, _, _, digest in lines}
    assert len(digests) == 1, lines


@needs_compiled
def test_a_torch_groups_compiled_allreduce_hands_what_it_does_not_run_to_the_method_while_the_group_lives() -> None:
    import datetime
    import gc
    import weakref

    class Group:  # stands in for the torch process group, whose Python allreduce takes what the step does not
        def allreduce(self, *args, **kwargs):
            return "by the method", args, kwargs

    group = Group()
    step = native.core.BlockingAllreduce({}, ("all_reduce",), Group, {}, object(), object(), datetime.timedelta(0),
                                         weakref.WeakMethod(group.allreduce))
    assert step([1.0], None) == ("by the method", ([1.0], None), {})  # no options record: not a blocking call
    assert step([1.0]) == ("by the method", ([1.0],), {})
    assert step([1.0], opts=None) == ("by the method", ([1.0],), {"opts": None})
    odd_options = object()  # its missing asyncOp is the method's to meet
    assert step([1.0], odd_options) == ("by the method", ([1.0], odd_options), {})
    del group
    gc.collect()
    with pytest.raises(RuntimeError, match="process group that no longer exists"):
        step([1.0], None)

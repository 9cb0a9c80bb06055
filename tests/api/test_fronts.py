"""The faces' compiled fronts (meshcomm/api/fronts.py, native/fronts.c): a repeated blocking call on numpy arrays
runs on its lane without the face's Python, and every other call reaches the face as it came."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.board.test_native import on_both_paths
from tests.marks import needs_compiled

REPEATS = 3  # the first call of a shape makes its lane; the others run on it
FRONTED = ("all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all_single", "broadcast", "gather", "reduce",
           "reduce_scatter", "reduce_scatter_tensor", "scatter")


def _entering_faces(run) -> dict:
    """run() while counting, by face, how often the Python of each fronted face was entered."""
    import meshcomm as dist

    faces = {getattr(getattr(dist, name), "__wrapped__", getattr(dist, name)).__code__: name for name in FRONTED}
    entered = dict.fromkeys(FRONTED, 0)

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code in faces:
            entered[faces[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


def repeated_calls_of_every_fronted_face(with_bfloat16: bool) -> tuple[dict, list, list]:
    """Every fronted face called REPEATS times on one shape, roots and ops given as keywords and by position: (how
    often each face's Python was entered, every output, whether the faces are plain functions)."""
    import meshcomm as dist
    from meshcomm import ReduceOp

    rank, n = dist.get_rank(), dist.get_world_size()
    outputs = []

    def calls() -> None:
        for repeat in range(REPEATS):
            x = np.arange(4, dtype=np.float32) + rank + repeat
            dist.all_reduce(x, ReduceOp.MAX)
            y = x.copy()
            dist.broadcast(y, src=n - 1)
            z = x.copy()
            dist.reduce(z, 0, op=ReduceOp.SUM)
            whole = np.empty(4 * n, np.float32)
            dist.all_gather_into_tensor(whole, x)
            part = np.empty(4, np.float32)
            dist.reduce_scatter_tensor(part, whole)
            swapped = np.empty(4 * n, np.float32)
            dist.all_to_all_single(swapped, whole)
            blocks = [np.empty(4, np.float32) for _ in range(n)]
            dist.all_gather(blocks, x)
            reduced = np.empty(4, np.float32)
            dist.reduce_scatter(reduced, blocks)
            gathered = [np.empty(4, np.float32) for _ in range(n)] if rank == 0 else None
            dist.gather(x, gathered, dst=0)
            scattered = np.empty(4, np.float32)
            dist.scatter(scattered, [x + i for i in range(n)] if rank == 1 else None, 1)
            outputs.append([a.tolist() for a in (x, y, z, whole, part, swapped, *blocks, reduced, scattered,
                                                  *(gathered or []))])

    entered = _entering_faces(calls)
    return entered, outputs, [type(getattr(dist, name)).__name__ for name in FRONTED]


@needs_compiled
def test_a_repeated_numpy_call_runs_without_the_faces_python_and_gives_its_bytes() -> None:
    python_results, compiled_results = on_both_paths(2, repeated_calls_of_every_fronted_face, timeout=120)
    # the Python path's faces are functions entered on every call; each front entered its face for the first
    # call only, which made the lane the others ran on
    assert all(entered == dict.fromkeys(FRONTED, REPEATS) and kinds == ["function"] * len(FRONTED)
               for entered, _, kinds in python_results), python_results
    assert all(entered == dict.fromkeys(FRONTED, 1) and kinds == ["Front"] * len(FRONTED)
               for entered, _, kinds in compiled_results), compiled_results
    assert [outputs for _, outputs, _ in compiled_results] == [outputs for _, outputs, _ in python_results]


def calls_a_front_leaves_to_its_face(with_bfloat16: bool) -> tuple[dict, list]:
    """Calls of a laned shape that a front must hand to its face: (how often the faces were entered, what each call
    gave: its error's type and message, or the array after it)."""
    import meshcomm as dist

    rank = dist.get_rank()
    x = np.ones(4, np.float32)
    for _ in range(REPEATS):  # the lanes of broadcast and all_reduce on this shape
        dist.broadcast(x, src=0)
        dist.all_reduce(x)

    class Subclass(np.ndarray):
        pass

    odd = [
        lambda: dist.broadcast(),  # a required argument missing
        lambda: dist.broadcast(x, 0, None, False, None, None),  # more positions than it takes
        lambda: dist.broadcast(x, src=0, source=0),  # a keyword it does not know
        lambda: dist.broadcast(x, 0, src=0),  # an argument twice
        lambda: dist.broadcast(x, src=1.0),  # a root that is not an int
        lambda: dist.broadcast(x, src=0, group=object()),  # not a group
        lambda: dist.broadcast(x, src=0, async_op=True).wait(timeout=30),
        lambda: dist.broadcast(x, src=0, algorithm="direct"),
        lambda: dist.broadcast(x, src=0, timeout=30.0),
        lambda: dist.broadcast(x.view(Subclass), src=0),  # not exactly an ndarray
        lambda: dist.all_reduce(x, "sum"),  # an op that is not a ReduceOp
        lambda: dist.all_reduce(x.tolist()),
    ]
    outcomes = []

    def calls() -> None:
        for call in odd:
            try:
                call()
                outcomes.append(x.tolist())
            except Exception as exc:  # noqa: BLE001 (the outcome compared across paths)
                outcomes.append([type(exc).__name__, str(exc)])
            x[:] = rank + 1

    return _entering_faces(calls), outcomes


@needs_compiled
def test_a_call_the_front_does_not_run_reaches_the_face_as_it_came() -> None:
    python_results, compiled_results = on_both_paths(2, calls_a_front_leaves_to_its_face, timeout=120)
    # each odd call entered the face on both paths, but the four Python cannot bind: they fail before its code runs
    for (python_entered, _), (entered, _) in zip(python_results, compiled_results):
        assert entered == python_entered == {**dict.fromkeys(FRONTED, 0), "broadcast": 6, "all_reduce": 2}, entered
    assert [outcomes for _, outcomes in compiled_results] == [outcomes for _, outcomes in python_results]
    assert any(isinstance(outcome[0], str) and "missing" in outcome[1] for outcome in python_results[0][1])


def calls_across_groups_and_on_a_destroyed_one(with_bfloat16: bool) -> tuple[dict, list]:
    """Repeated calls that alternate between two shapes and two groups, then one on a group destroyed since: (how
    often each face's Python was entered, every output and the error)."""
    import meshcomm as dist

    rank = dist.get_rank()
    group = dist.new_group([0, 1])
    seen = []

    def calls() -> None:
        for repeat in range(REPEATS):
            for size, on in ((4, None), (4, group), (6, None), (6, group)):
                x = np.arange(size, dtype=np.float32) + 10 * rank + repeat
                dist.broadcast(x, src=1, group=on)
                dist.all_reduce(x, group=on)
                seen.append(x.tolist())
        dist.destroy_process_group(group)
        try:
            dist.broadcast(np.zeros(4, np.float32), src=0, group=group)
        except ValueError as exc:
            seen.append(str(exc))

    return _entering_faces(calls), seen


@needs_compiled
def test_a_front_follows_the_call_to_its_groups_lane_and_not_past_the_groups_end() -> None:
    python_results, compiled_results = on_both_paths(2, calls_across_groups_and_on_a_destroyed_one, timeout=120)
    assert [seen for _, seen in compiled_results] == [seen for _, seen in python_results]
    assert all("destroyed" in seen[-1] for _, seen in compiled_results)
    # the first call of each shape on each group makes its lane; the call on the destroyed group reaches the face
    for entered, _ in compiled_results:
        assert entered == {**dict.fromkeys(FRONTED, 0), "broadcast": 5, "all_reduce": 4}, entered


def calls_whose_key_changes_in_dtype_or_shape_alone(with_bfloat16: bool) -> tuple[dict, list]:
    """Repeated all_reduces and all_gathers whose arrays keep their byte count but change dtype (float32, int32),
    shape ((2, 3), (3, 2)) or become 0-d: (how often each face's Python was entered, every output)."""
    import meshcomm as dist

    rank = dist.get_rank()
    seen = []

    def calls() -> None:
        for repeat in range(REPEATS):
            for dtype in (np.float32, np.int32, np.float32):
                # ints whose bits are floats near 1.0: a float32 lane run on them would not sum them as ints
                x = (np.arange(4) * 3 + rank + repeat + (0 if dtype is np.float32 else 0x3F800000)).astype(dtype)
                dist.all_reduce(x)
                seen.append([x.dtype.name, x.tolist()])
            for shape in ((2, 3), (3, 2), (6,), ()):
                x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
                x += rank + repeat  # in place: a 0-d array stays an array
                out = [np.empty_like(x) for _ in range(2)]
                dist.all_gather(out, x)
                seen.append([x.shape, [o.shape for o in out], [o.tolist() for o in out]])

    return _entering_faces(calls), seen


@needs_compiled
def test_a_front_runs_no_lane_for_a_key_that_differs_in_dtype_or_shape_alone() -> None:
    python_results, compiled_results = on_both_paths(2, calls_whose_key_changes_in_dtype_or_shape_alone, timeout=120)
    assert [seen for _, seen in compiled_results] == [seen for _, seen in python_results]
    # each dtype's and each shape's first call makes its lane
    for entered, _ in compiled_results:
        assert entered == {**dict.fromkeys(FRONTED, 0), "all_reduce": 2, "all_gather": 4}, entered


@needs_compiled
def test_a_front_reads_as_its_face_and_pickles_by_its_name() -> None:
    import inspect
    import pickle
    import pydoc
    import weakref

    import meshcomm as dist
    from meshcomm.api import collectives

    for name in FRONTED:
        front = getattr(dist, name)
        assert type(front).__name__ == "Front" and front is getattr(collectives, name)
        assert front.__name__ == name and front.__doc__ == front.__wrapped__.__doc__
        assert str(inspect.signature(front)).startswith("(") and inspect.isroutine(front)
        assert pickle.loads(pickle.dumps(front)) is front and weakref.ref(front)() is front
        page = pydoc.render_doc(front, renderer=pydoc.plaintext)
        assert f"\n{name}(" in page and front.__doc__ in page


def test_a_front_must_be_told_every_parameter() -> None:
    from meshcomm.api.fronts import fronted

    def face(tensor, src=None, group=None, async_op=False, *, algorithm=None, timeout=None):
        """A face whose `src` has no rule."""

    with pytest.raises(ValueError, match="missing \\['src'\\]"):
        fronted(("src", "tensor.dtype"), ("tensor", "tensor"), tensor="array")(face)
    with pytest.raises(ValueError, match="rules {'src': 'integer'} are none of"):
        fronted(("src",), ("tensor", "tensor"), tensor="array", src="integer")(face)

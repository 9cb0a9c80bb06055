"""The flight recorder's two rings, compiled (native/records.c) and pure Python (trace/records.py), answer alike."""

from __future__ import annotations

import pytest

from meshcomm import native
from meshcomm.executor import fingerprint as fp
from meshcomm.trace.flight_recorder import DONE_STATE, FAILED_STATE, STARTED_STATE, STARTED, ENDED
from meshcomm.trace.records import Records
from tests.marks import needs_compiled

STATES = (STARTED_STATE, DONE_STATE, FAILED_STATE)
ALL_REDUCE = fp.pack("all_reduce", "float32", "sum", 0, 1024)


def untimed(row: list | None) -> list | None:
    """A row with its times replaced by whether they are there, and ended not before started."""
    if row is None:
        return None
    timed = row[ENDED] is None or row[ENDED] >= row[STARTED] > 0
    return [*row[:STARTED], row[ENDED] is not None, timed, *row[ENDED + 1:]]


def a_ring_of_three(made) -> dict:
    """Collectives on two groups and a send, some finished, one failed, some finished after leaving the ring or
    after a newer call of their group started."""
    records = made(3, STATES)
    first = records.start("default_pg", 0, ALL_REDUCE, "ring", (0, 1))
    records.finish(first)
    sub = records.start("sub", 0, ALL_REDUCE, "direct", (1,))
    failed = records.start("default_pg", 1, ALL_REDUCE, "ring", (0, 1))
    records.finish(failed, "CommTimeoutError: timed out")
    sent = records.start("default_pg", None, "send 8 B to rank 1, tag 0", "p2p", (1,))
    records.finish(sent)
    early = {"rows": [untimed(row) for row in records.rows()], "failed": untimed(records.row(failed))}
    newest = records.start("default_pg", 2, ALL_REDUCE, "ring", (0, 1))
    pushed_out = {"row": untimed(records.row(first)), "sub": untimed(records.row(sub))}
    records.finish(sub)  # after it left the ring: its group's latest still ends
    sub_latest = untimed(records.latest("sub"))
    records.finish(first, "late")  # left the ring, and no longer its group's latest: nothing changes
    overtaken = records.start("sub", 1, ALL_REDUCE, "direct", (1,))
    records.start("sub", 2, ALL_REDUCE, "direct", (1,))
    records.finish(overtaken)  # in the ring, no longer its group's latest
    records.finish(newest, "CommTimeoutError: timed out")
    return {"early": early, "rows": [untimed(row) for row in records.rows()], "pushed out": pushed_out,
            "sub latest": sub_latest, "latest": {group: untimed(records.latest(group))
                                                 for group in ("default_pg", "sub", "never")}}


@needs_compiled
def test_the_compiled_ring_answers_as_the_pure_python_one() -> None:
    compiled, python = a_ring_of_three(native.core.Records), a_ring_of_three(Records)
    assert compiled == python


def test_each_ring_keeps_the_last_records_and_each_groups_latest_beyond_them() -> None:
    timed_out = "CommTimeoutError: timed out"
    for made in [Records] + ([] if native.core is None else [native.core.Records]):
        answers = a_ring_of_three(made)
        sent = ["default_pg", None, "send 8 B to rank 1, tag 0", "p2p", (1,), DONE_STATE, True, True, None]
        early = answers["early"]
        assert [row[1] for row in early["rows"]] == [0, 1, None] and early["rows"][2] == sent, made
        assert early["failed"][5:] == [FAILED_STATE, True, True, timed_out]
        assert answers["pushed out"] == {"row": None, "sub": None}
        assert answers["sub latest"] == ["sub", 0, ALL_REDUCE, "direct", (1,), DONE_STATE, True, True, None]
        rows = answers["rows"]
        assert [(row[0], row[1], row[5]) for row in rows] == [("default_pg", 2, FAILED_STATE), ("sub", 1, DONE_STATE),
                                                              ("sub", 2, STARTED_STATE)], made
        assert answers["latest"] == {"default_pg": rows[0], "sub": rows[2], "never": None}


@needs_compiled
def test_the_compiled_ring_refuses_what_it_cannot_record() -> None:
    with pytest.raises(ValueError, match="capacity >= 1"):
        native.core.Records(0, STATES)
    records = native.core.Records(2, STATES)
    with pytest.raises(ValueError, match="seq is not negative"):
        records.start("default_pg", -1, ALL_REDUCE, "ring", (0,))
    number = records.start("default_pg", 0, ALL_REDUCE, "ring", (0,))
    with pytest.raises(TypeError, match="failure's words"):
        records.finish(number, ValueError("not words"))
    assert records.row(number)[5] == STARTED_STATE


@needs_compiled
def test_the_compiled_ring_reads_safely_while_a_finalizer_writes_it() -> None:
    """Reading the ring makes lists, which may collect garbage and run a finalizer that writes the ring (another
    thread can do the same once the finalizer lets go of the GIL): what was read is whole, never freed memory."""
    import gc

    records = native.core.Records(8, STATES)
    for seq in range(8):
        records.start("default_pg", seq, ALL_REDUCE, "ring", (0,))
    left = [20]

    class Writer:
        def __del__(self) -> None:
            if left[0] > 0:
                left[0] -= 1
                for seq in range(8):  # the whole ring written over, and new groups' cells made
                    records.start(f"group {left[0]}", 100 + seq, ALL_REDUCE, "ring", (0,))
                Writer().in_a_cycle()

        def in_a_cycle(self) -> None:
            self.me = self

    threshold, kept = gc.get_threshold(), []
    try:
        for read in (records.rows, lambda: records.latest("default_pg")):
            left[0] = 20
            gc.collect()  # counts from zero
            gc.disable()
            Writer().in_a_cycle()
            # allocations enough that the next one collects, kept so that no list is freed for the read to reuse
            kept.append([[] for _ in range(200)])
            gc.set_threshold(1, 1000, 1000)  # every allocation may collect, and so run Writer.__del__
            gc.enable()
            got = read()
            gc.set_threshold(*threshold)
            rows = got if isinstance(got, list) and got and isinstance(got[0], list) else [got]
            assert left[0] < 20, "no finalizer ran while reading"
            assert all(len(row) == 9 and isinstance(row[0], str) and row[2] == ALL_REDUCE for row in rows), rows
    finally:
        gc.set_threshold(*threshold)
        gc.collect()

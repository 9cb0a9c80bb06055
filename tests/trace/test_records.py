"""The flight recorder's two rings, compiled (native/records.c) and pure Python (trace/records.py), answer alike."""

from __future__ import annotations

import pytest

from meshcomm import native
from meshcomm.executor import fingerprint as fp
from meshcomm.trace.flight_recorder import DONE_STATE, FAILED_STATE, STARTED_STATE, STARTED, ENDED
from meshcomm.trace.records import Records

STATES = (STARTED_STATE, DONE_STATE, FAILED_STATE)
ALL_REDUCE = fp.pack("all_reduce", "float32", "sum", 0, 1024)
needs_compiled = pytest.mark.skipif(native.core is None, reason="the compiled path is not active (not built, or "
                                    "MESHCOMM_NATIVE=0)")


def untimed(row: list | None) -> list | None:
    """A row with its times replaced by whether they are there, and ended not before started."""
    if row is None:
        return None
    timed = row[ENDED] is None or row[ENDED] >= row[STARTED] > 0
    return [*row[:STARTED], row[ENDED] is not None, timed, *row[ENDED + 1:]]


def a_ring_of_three(made) -> dict:
    """Collectives on two groups and a send, some finished, one failed, one finished after leaving the ring."""
    records = made(3, STATES)
    first = records.start("default_pg", 0, ALL_REDUCE, "ring", (0, 1))
    records.finish(first)
    sub = records.start("sub", 0, ALL_REDUCE, "direct", (1,))
    failed = records.start("default_pg", 1, ALL_REDUCE, "ring", (0, 1))
    records.finish(failed, "CommTimeoutError: timed out")
    sent = records.start("default_pg", None, "send 8 B to rank 1, tag 0", "p2p", (1,))
    records.finish(sent)
    records.start("default_pg", 2, ALL_REDUCE, "ring", (0, 1))
    pushed_out = {"row": untimed(records.row(first)), "sub": untimed(records.row(sub))}
    records.finish(sub)  # after it left the ring: its group's latest still ends
    return {"rows": [untimed(row) for row in records.rows()], "pushed out": pushed_out,
            "failed": untimed(records.row(failed)), "latest": {group: untimed(records.latest(group))
                                                             for group in ("default_pg", "sub", "never")}}


@needs_compiled
def test_the_compiled_ring_answers_as_the_pure_python_one() -> None:
    compiled, python = a_ring_of_three(native.core.Records), a_ring_of_three(Records)
    assert compiled == python


def test_each_ring_keeps_the_last_records_and_each_groups_latest_beyond_them() -> None:
    for made in [Records] + ([] if native.core is None else [native.core.Records]):
        answers = a_ring_of_three(made)
        sent = ["default_pg", None, "send 8 B to rank 1, tag 0", "p2p", (1,), DONE_STATE, True, True, None]
        assert [row[1] for row in answers["rows"]] == [1, None, 2], made
        assert answers["rows"][1] == sent and answers["failed"][5:] == [FAILED_STATE, True, True,
                                                                          "CommTimeoutError: timed out"]
        assert answers["pushed out"] == {"row": None, "sub": None}
        assert answers["latest"]["sub"] == ["sub", 0, ALL_REDUCE, "direct", (1,), DONE_STATE, True, True, None]
        assert answers["latest"]["default_pg"][1] == 2 and answers["latest"]["never"] is None


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

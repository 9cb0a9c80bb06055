"""The board's protocol in one process: posts take slots in turn, readers find calls by sequence number, waits end."""

from __future__ import annotations

import os

import numpy as np
import pytest

from meshcomm.board.segment import SLOTS, Board
from meshcomm.transport.shm import DIRECTORY, available

pytestmark = pytest.mark.skipif(not available(), reason="needs /dev/shm, futexes and x86-64")

PRINT = bytes(range(16))


def post(board: Board, member: int, seq: int, data: bytes) -> None:
    board.post(member, seq, PRINT, memoryview(data), spin=0.0, deadline=float("inf"),
               between=lambda missing: pytest.fail(f"waited for {missing}"))


@pytest.fixture
def boards():
    path = os.path.join(DIRECTORY, f"meshcomm-test-board-{os.getpid()}")
    # Three slots per member instead of the usual sixteen, so that slots get reused after a few calls.
    members = [Board(path, 3, 256, create=member == 0, slots=3) for member in range(3)]  # member 0 creates it
    members[0].unlink()
    yield members
    for board in members:
        board.close()


def test_a_post_is_found_by_its_sequence_number_in_any_slot(boards) -> None:
    writer, reader = boards[1], boards[0]
    post(writer, 1, 7, b"seven")
    post(boards[0], 0, 7, b"")
    post(boards[2], 2, 7, b"")
    post(writer, 1, 9, b"nine!!")  # the member's next board call takes its next slot
    assert reader.posted(1, 7) and reader.posted(1, 9) and not reader.posted(1, 8)
    assert bytes(reader.data(1, 7)) == b"seven" and bytes(reader.data(1, 9)) == b"nine!!"
    assert reader.fingerprint(1, 9) == PRINT
    post(boards[0], 0, 9, b"")
    post(boards[2], 2, 9, b"")
    post(writer, 1, 10, b"ten")
    for member in (0, 2):
        post(boards[member], member, 10, b"")
    post(writer, 1, 12, b"x")  # the slot of call 7 again, once everyone has posted call 9
    assert not reader.posted(1, 7) and bytes(reader.data(1, 12)) == b"x" and bytes(reader.data(1, 10)) == b"ten"
    with pytest.raises(LookupError, match="member 1 has no post of call 7"):
        reader.data(1, 7)


def test_members_out_of_step_still_find_each_others_posts(boards) -> None:
    # Member 1 made one board call the others did not (a call that failed elsewhere): from then on its
    # posts of a call sit in another slot than theirs, and they are searched for there.
    post(boards[1], 1, 3, b"extra")
    for seq in (5, 6, 8):
        for member in (0, 1, 2):
            post(boards[member], member, seq, bytes([seq, member]))
        for reader, member in ((0, 1), (1, 2), (2, 1)):
            assert bytes(boards[reader].data(member, seq)) == bytes([seq, member]), (seq, reader, member)


def test_waiting_asks_only_about_members_still_missing(boards) -> None:
    post(boards[1], 1, 0, b"")
    asked = []

    def between(missing):
        asked.append(list(missing))
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=float("inf"), between=between)
    assert asked == [[2]]  # member 1 posted: if it has left since, that is no reason to fail


def test_a_member_that_posts_and_leaves_while_a_waiter_looks_away_does_not_fail_the_call(boards) -> None:
    # The waiter found member 2 missing; before it asks whether member 2 is still there, member 2
    # posts, finishes and exits, so the question reports it lost. Its post is there: the call stands.
    post(boards[1], 1, 0, b"")

    def between(missing):
        post(boards[2], 2, 0, b"bye")
        raise ConnectionError(f"members {missing} are gone")

    boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=float("inf"), between=between)
    assert bytes(boards[0].data(2, 0)) == b"bye"


def test_a_member_that_leaves_without_posting_fails_the_call(boards) -> None:
    post(boards[1], 1, 0, b"")

    def between(missing):
        raise ConnectionError(f"members {missing} are gone")

    with pytest.raises(ConnectionError, match=r"members \[2\] are gone"):
        boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=float("inf"), between=between)


def test_a_wait_past_its_deadline_names_the_members_that_did_not_post(boards) -> None:
    post(boards[2], 2, 0, b"")
    with pytest.raises(TimeoutError, match=r"members \[1\]"):
        boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=0.0, between=lambda missing: None)


def test_a_wait_ends_once_everyone_posted(boards) -> None:
    for member in (1, 2):
        post(boards[member], member, 4, b"ab")
    boards[0].wait(0, 4, (1, 2), spin=0.0, deadline=float("inf"), between=lambda missing: pytest.fail("waited"))


def test_on_a_crowded_host_a_wait_hands_its_core_over_instead_of_sleeping(boards, monkeypatch) -> None:
    # The awaited member posts while the waiter yields: the wait ends without ever going to sleep (between,
    # which runs before every sleep, would fail the test).
    yields = []

    def sched_yield() -> None:
        yields.append(1)
        if len(yields) == 3:
            post(boards[1], 1, 5, b"late")

    monkeypatch.setattr(os, "sched_yield", sched_yield)
    post(boards[2], 2, 5, b"")
    boards[0].yield_seconds, boards[0].yielding = 60.0, True
    boards[0].wait(0, 5, (1, 2), spin=0.0, deadline=float("inf"), between=lambda missing: pytest.fail("slept"))
    assert len(yields) == 3


def test_a_wait_that_yields_sleeps_once_its_yielding_is_over(boards, monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_yield", lambda: None)
    slept = []
    boards[0].yield_seconds, boards[0].yielding = 1e-4, True
    with pytest.raises(TimeoutError, match=r"members \[1\]"):
        boards[0].wait(0, 6, (1,), spin=0.0, deadline=0.0, between=slept.append)
    assert slept == [[1]]


def test_a_member_that_reads_nothing_posts_call_b_once_everyone_posted_call_b_minus_slots_plus_one(boards) -> None:
    root = boards[0]
    for seq, data in enumerate((b"first", b"second", b"third")):
        post(root, 0, seq, data)  # a broadcast's root: it waits for nobody's post of a call, and has three slots
    asked = []

    def between(missing):
        asked.append(list(missing))
        raise RuntimeError("stop")

    def fourth() -> None:  # it takes call 0's slot, and waits until everyone has posted call 1
        root.post(0, 3, PRINT, memoryview(b"fourth"), spin=0.0, deadline=float("inf"), between=between)

    with pytest.raises(RuntimeError):
        fourth()
    assert asked == [[1, 2]]
    for member in (1, 2):
        post(boards[member], member, 0, b"")
        assert bytes(boards[member].data(0, 0)) == b"first"
    with pytest.raises(RuntimeError):  # posting call 0 is not enough: they may still be reading it
        fourth()
    assert asked[-1] == [1, 2]
    post(boards[1], 1, 1, b"")
    with pytest.raises(RuntimeError):
        fourth()
    assert asked[-1] == [2]
    post(boards[2], 2, 1, b"")
    fourth()
    assert bytes(boards[1].data(0, 3)) == b"fourth" and bytes(boards[1].data(0, 2)) == b"third"
    assert not boards[1].posted(0, 0)


def test_a_board_has_sixteen_slots_per_member_unless_told_and_at_least_two() -> None:
    path = os.path.join(DIRECTORY, f"meshcomm-test-board-slots-{os.getpid()}")
    board = Board(path, 2, 64, create=True)
    try:
        assert board.slots == SLOTS == 16
    finally:
        board.close()
        board.unlink()
    with pytest.raises(ValueError, match="at least 2 slots per member, got 1"):
        Board(path, 2, 64, create=True, slots=1)
    assert not os.path.exists(path)


def test_nothing_is_left_in_dev_shm(boards) -> None:
    assert not os.path.exists(boards[0].path)


def test_arrays_of_posts_follow_the_slot_size_and_dtype_of_each_call(boards) -> None:
    writer, reader = boards[1], boards[0]
    everyone = (0, 1, 2)
    calls = [(7, np.arange(4, dtype=np.float32)), (9, np.arange(4, dtype=np.float32) + 10),
             (12, np.arange(4, dtype=np.float32) + 20),  # call 7's slot and size: the same view, new bytes
             (14, np.arange(3, dtype=np.float32) + 30), (16, np.arange(3, dtype=np.int16) + 40)]
    for seq, data in calls:
        post(writer, 1, seq, data.tobytes())
        post(boards[0], 0, seq, b"")
        post(boards[2], 2, seq, b"")
        got = reader.array(1, seq, data.dtype)
        assert got.dtype == data.dtype and np.array_equal(got, data), seq
        assert reader.agree(everyone, seq, PRINT) is None
    assert bytes(reader.array(1, 16, np.dtype(np.uint8))) == calls[-1][1].tobytes()
    with pytest.raises(ValueError):  # 6 bytes are no whole number of float32s
        reader.array(1, 16, np.dtype(np.float32))


def test_agree_names_the_first_member_whose_post_carries_another_fingerprint(boards) -> None:
    post(boards[0], 0, 3, b"")
    boards[1].post(1, 3, bytes(16), memoryview(b""), spin=0.0, deadline=float("inf"), between=lambda missing: None)
    post(boards[2], 2, 3, b"")
    assert boards[2].agree((0, 1), 3, PRINT) == 1 and boards[2].agree((0,), 3, PRINT) is None


def test_a_post_by_reference_is_read_from_the_poster_s_memory_and_may_exceed_a_slot(boards) -> None:
    # The three members live in this process, so reading the poster's memory reads our own (cma.py).
    big = (np.arange(1000) % 251).astype(np.uint8)  # 1000 bytes on a board of 256-byte slots
    boards[1].post(1, 5, PRINT, memoryview(big), spin=0.0, deadline=float("inf"),
                   between=lambda missing: pytest.fail("waited"), by_reference=True)
    post(boards[0], 0, 5, b"small")
    reader = boards[2]
    assert reader.by_reference(1, 5) and not reader.by_reference(0, 5)
    target = bytearray(300)
    reader.read_into(1, 5, 600, memoryview(target))
    assert bytes(target) == big[600:900].tobytes()
    assert reader.array(1, 5, np.dtype(np.uint8)) is None  # readers learn where a post is from array()
    assert bytes(reader.array(0, 5, np.dtype(np.uint8))) == b"small"
    with pytest.raises(LookupError, match="member 0 posted call 5 in its slot"):
        reader.read_into(0, 5, 1, memoryview(bytearray(3)))


def test_a_post_by_reference_that_fits_the_staging_area_is_copied_there_and_read_out_of_it() -> None:
    path = os.path.join(DIRECTORY, f"meshcomm-test-staged-board-{os.getpid()}")
    members = [Board(path, 2, 256, create=member == 0, slots=4, stage_bytes=1000)
               for member in range(2)]  # a slot per post below: the reader posts none
    members[0].unlink()
    poster, reader = members[1], members[0]
    try:
        staged = (np.arange(800) % 251).astype(np.uint8)  # larger than a slot, within the staging area
        poster.post(1, 5, PRINT, memoryview(staged), spin=0.0, deadline=float("inf"),
                    between=lambda missing: pytest.fail("waited"), by_reference=True, stage_from=500)
        staged[:] = 0  # the readers see what was posted, not the poster's memory
        target = bytearray(300)
        reader.read_into(1, 5, 400, memoryview(target))
        assert bytes(target) == ((np.arange(800) % 251).astype(np.uint8))[400:700].tobytes()
        assert reader.by_reference(1, 5)  # its readers still say they finished, and its poster waits for that
        with pytest.raises(ValueError, match="member 1's staged post of call 5 has no bytes 600 to 900"):
            reader.read_into(1, 5, 600, memoryview(bytearray(300)))  # past the post, within the area
        larger = np.full(1001, 3, np.uint8)
        poster.post(1, 6, PRINT, memoryview(larger), spin=0.0, deadline=float("inf"),
                    between=lambda missing: pytest.fail("waited"), by_reference=True, stage_from=500)
        larger[:] = 4  # read where it is (cma.py; both members live in this process)
        reader.read_into(1, 6, 1, memoryview(target))
        assert bytes(target) == bytes([4] * 300)
        smaller = np.full(499, 8, np.uint8)  # larger than a slot, smaller than the staged posts
        poster.post(1, 8, PRINT, memoryview(smaller), spin=0.0, deadline=float("inf"),
                    between=lambda missing: pytest.fail("waited"), by_reference=True, stage_from=500)
        smaller[:] = 9
        reader.read_into(1, 8, 0, memoryview(target))
        assert bytes(target) == bytes([9] * 300)
        written = np.full(600, 5, np.uint8)  # a size that is staged, but
        output = np.zeros(600, np.uint8)
        poster.post(1, 7, PRINT, memoryview(written), spin=0.0, deadline=float("inf"),
                    between=lambda missing: pytest.fail("waited"), by_reference=True, output=memoryview(output),
                    stage_from=500)
        written[:] = 6  # a post whose output the members write into is never staged (the two-shot all-reduce)
        reader.read_into(1, 7, 0, memoryview(target))
        assert bytes(target) == bytes([6] * 300)
    finally:
        for board in members:
            board.close()


def test_a_post_by_reference_of_a_staged_size_not_to_be_staged_is_read_where_it_is() -> None:
    path = os.path.join(DIRECTORY, f"meshcomm-test-unstaged-board-{os.getpid()}")
    members = [Board(path, 2, 256, create=member == 0, slots=4, stage_bytes=1000) for member in range(2)]
    members[0].unlink()
    poster, reader = members[1], members[0]
    try:
        target = bytearray(300)
        for seq, staged, stage_from in ((5, False, None), (6, True, 500), (7, False, 601)):
            payload = np.full(600, seq, np.uint8)  # staged from 500 bytes, not when never, nor from 601
            poster.post(1, seq, PRINT, memoryview(payload), spin=0.0, deadline=float("inf"),
                        between=lambda missing: pytest.fail("waited"), by_reference=True, stage_from=stage_from)
            payload[:] = 0  # a staged post's readers see what was posted, the others the poster's memory
            reader.read_into(1, seq, 300, memoryview(target))
            assert bytes(target) == bytes([seq if staged else 0] * 300)
    finally:
        for board in members:
            board.close()


def test_a_board_has_no_staging_area_of_negative_size() -> None:
    with pytest.raises(ValueError, match="staging area cannot be negative, got -1 bytes"):
        Board(os.path.join(DIRECTORY, f"meshcomm-test-no-board-{os.getpid()}"), 2, 64, create=True, stage_bytes=-1)


def test_a_poster_by_reference_waits_until_each_reader_has_finished(boards) -> None:
    poster = boards[0]
    boards[1].finish(1, 6)
    with pytest.raises(TimeoutError, match=r"members \[2\] of the board had not finished reading"):
        poster.wait_finished(0, 6, (1, 2), spin=0.0, deadline=0.0, between=lambda missing: None)
    boards[2].finish(2, 7)  # a later call finished implies this one
    poster.wait_finished(0, 6, (1, 2), spin=0.0, deadline=float("inf"), between=lambda missing: pytest.fail("waited"))


def test_a_reader_that_leaves_before_finishing_fails_the_poster_s_wait(boards) -> None:
    def between(missing):
        raise ConnectionError(f"members {missing} are gone")

    boards[1].finish(1, 3)
    with pytest.raises(ConnectionError, match=r"members \[2\] are gone"):
        boards[0].wait_finished(0, 3, (1, 2), spin=0.0, deadline=float("inf"), between=between)


@pytest.mark.parametrize("left_out, kept", [((3, 7), b"abcHIJ"), ((0, 4), b"efgHIJ"), ((7, 10), b"abcdefg"),
                                             ((4, 4), b"abcdefgHIJ")])
def test_a_slot_post_may_leave_out_bytes_nobody_reads(boards, left_out, kept) -> None:
    data = memoryview(b"abcdefgHIJ")
    boards[1].post(1, 2, PRINT, data, spin=0.0, deadline=float("inf"), between=lambda missing: pytest.fail("waited"),
                   left_out=left_out)
    assert bytes(boards[0].data(1, 2)) == kept
    assert bytes(data) == b"abcdefgHIJ"


def test_members_write_into_an_output_posted_with_the_call(boards) -> None:
    # The three members live in this process, so writing the poster's memory writes our own (cma.py).
    data = np.zeros(600, np.uint8)
    output = np.zeros(600, np.uint8)
    boards[0].post(0, 8, PRINT, memoryview(data), spin=0.0, deadline=float("inf"),
                   between=lambda missing: pytest.fail("waited"), by_reference=True, output=memoryview(output))
    boards[2].write_into(0, 8, 400, memoryview(bytes(range(1, 101))))
    assert bytes(output[400:500]) == bytes(range(1, 101))
    assert not output[:400].any() and not output[500:].any() and not data.any()


def test_agree_names_a_member_that_posts_its_output_when_this_one_does_not_or_the_other_way(boards) -> None:
    output = np.zeros(8, np.uint8)
    boards[0].post(0, 4, PRINT, memoryview(b"in"), spin=0.0, deadline=float("inf"),
                   between=lambda missing: None, by_reference=True, output=memoryview(output))
    post(boards[1], 1, 4, b"in")
    assert boards[2].agree((0, 1), 4, PRINT) == 0  # a direct call, and member 0 posted for a two-shot one
    assert boards[2].agree((0, 1), 4, PRINT, output=True) == 1
    assert boards[2].agree((0,), 4, PRINT, output=True) is None

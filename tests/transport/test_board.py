"""The board's protocol in one process: posts alternate slots, readers find calls by sequence number, waits end."""

from __future__ import annotations

import os

import pytest

from meshcomm.transport.board import Board
from meshcomm.transport.shm import DIRECTORY, available

pytestmark = pytest.mark.skipif(not available(), reason="needs /dev/shm, futexes and x86-64")

PRINT = bytes(range(16))


def post(board: Board, member: int, seq: int, data: bytes) -> None:
    board.post(member, seq, PRINT, memoryview(data), spin=0.0, deadline=float("inf"),
               between=lambda missing: pytest.fail(f"waited for {missing}"))


@pytest.fixture
def boards():
    path = os.path.join(DIRECTORY, f"meshcomm-test-board-{os.getpid()}")
    members = [Board(path, 3, 256, create=True)] + [Board(path, 3, 256, create=False) for _ in range(2)]
    members[0].unlink()
    yield members
    for board in members:
        board.close()


def test_a_post_is_found_by_its_sequence_number_in_either_slot(boards) -> None:
    writer, reader = boards[1], boards[0]
    post(writer, 1, 7, b"seven")
    post(boards[0], 0, 7, b"")
    post(boards[2], 2, 7, b"")
    post(writer, 1, 9, b"nine!!")  # the member's next board call takes its other slot
    assert reader.posted(1, 7) and reader.posted(1, 9) and not reader.posted(1, 8)
    assert bytes(reader.data(1, 7)) == b"seven" and bytes(reader.data(1, 9)) == b"nine!!"
    assert reader.fingerprint(1, 9) == PRINT
    post(boards[0], 0, 9, b"")
    post(boards[2], 2, 9, b"")
    post(writer, 1, 12, b"x")  # reuses the slot of call 7, once everyone has posted call 9
    assert not reader.posted(1, 7) and bytes(reader.data(1, 12)) == b"x"


def test_waiting_asks_only_about_members_still_missing(boards) -> None:
    post(boards[1], 1, 0, b"")
    asked = []

    def between(missing):
        asked.append(list(missing))
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=float("inf"), between=between)
    assert asked == [[2]]  # member 1 posted: if it has left since, that is no reason to fail


def test_a_wait_past_its_deadline_names_the_members_that_did_not_post(boards) -> None:
    post(boards[2], 2, 0, b"")
    with pytest.raises(TimeoutError, match=r"members \[1\]"):
        boards[0].wait(0, 0, (1, 2), spin=0.0, deadline=0.0, between=lambda missing: None)


def test_a_wait_ends_once_everyone_posted(boards) -> None:
    for member in (1, 2):
        post(boards[member], member, 4, b"ab")
    boards[0].wait(0, 4, (1, 2), spin=0.0, deadline=float("inf"), between=lambda missing: pytest.fail("waited"))


def test_a_member_that_reads_nothing_gets_one_call_ahead_and_no_further(boards) -> None:
    root = boards[0]
    post(root, 0, 0, b"first")  # a broadcast's root: it waits for nobody's post of this call
    asked = []

    def between(missing):
        asked.append(list(missing))
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):  # its next post waits until the others have posted call 0
        root.post(0, 1, PRINT, memoryview(b"second"), spin=0.0, deadline=float("inf"), between=between)
    assert asked == [[1, 2]] and bytes(boards[1].data(0, 0)) == b"first"
    post(boards[1], 1, 0, b"")
    post(boards[2], 2, 0, b"")
    post(root, 0, 1, b"second")
    assert bytes(boards[1].data(0, 1)) == b"second" and bytes(boards[1].data(0, 0)) == b"first"


def test_nothing_is_left_in_dev_shm(boards) -> None:
    assert not os.path.exists(boards[0].path)

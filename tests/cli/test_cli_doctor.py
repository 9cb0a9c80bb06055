"""`meshcomm doctor` without dumps: what this installation runs, and the room its boards have."""

from __future__ import annotations

import os

from meshcomm.board import run as board_run
from meshcomm.board import segment
from meshcomm.cli import doctor


def test_doctor_says_how_many_ranks_whole_boards_fit_in_the_free_shared_memory(monkeypatch) -> None:
    per_rank = segment.member_bytes(board_run.SLOT_BYTES, segment.SLOTS, board_run.STAGE_BYTES)

    class Filesystem:  # 2.5 ranks' boards free, in 4 KiB blocks
        f_frsize = 4096
        f_bavail = int(2.5 * per_rank) // 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Filesystem())
    line = next(line for line in doctor.installation().splitlines() if line.startswith("shared memory:"))
    assert f"whole boards for 2 ranks, as a group's board takes up to {per_rank / 2**20:.0f} MiB per rank" in line
    assert f"{Filesystem.f_bavail * 4096 / 2**20:,.0f} MiB free" in line


def test_doctor_leaves_the_room_out_where_the_shared_memory_filesystem_cannot_be_read(monkeypatch) -> None:
    def unreadable(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(os, "statvfs", unreadable)
    line = next(line for line in doctor.installation().splitlines() if line.startswith("shared memory:"))
    assert "free" not in line and "(/dev/shm)" in line

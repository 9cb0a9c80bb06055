"""meshcomm doctor lines dumps up and names the rank that diverged or stalled."""

from __future__ import annotations

from meshcomm.cli.main import main
from meshcomm.executor import fingerprint as fp
from meshcomm.trace import doctor
from meshcomm.trace.flight_recorder import FlightRecorder

ALL_REDUCE = fp.pack("all_reduce", "float32", "sum", 0, 4)
BROADCAST = fp.pack("broadcast", "float32", "none", 0, 4)


def write_dumps(directory, calls_per_rank: dict[int, list[bytes]], world_size: int) -> None:
    """Each rank ran `calls` on the world group; the last one is still in progress."""
    for rank, calls in calls_per_rank.items():
        recorder = FlightRecorder(rank, world_size)
        for seq, call in enumerate(calls):
            entry = recorder.start("default_pg", seq, call, "ring", tuple(range(world_size)))
            if seq < len(calls) - 1:
                recorder.finish(entry)
        recorder.dump("test", str(directory))


def test_the_rank_that_called_another_collective_is_named(tmp_path) -> None:
    write_dumps(tmp_path, {0: [ALL_REDUCE, ALL_REDUCE], 1: [ALL_REDUCE, BROADCAST], 2: [ALL_REDUCE, ALL_REDUCE]}, 3)
    findings = doctor.diagnose(doctor.load(str(tmp_path)))
    assert findings[0].kind == "diverged" and findings[0].ranks == [1]
    assert "seq 1" in findings[0].text and "broadcast" in findings[0].text


def test_the_rank_that_never_started_the_operation_is_named(tmp_path) -> None:
    write_dumps(tmp_path, {0: [ALL_REDUCE] * 3, 1: [ALL_REDUCE] * 3, 2: [ALL_REDUCE] * 2, 3: [ALL_REDUCE]}, 4)
    findings = doctor.diagnose(doctor.load(str(tmp_path)))
    assert [(f.kind, f.ranks) for f in findings] == [("stalled", [3]), ("stalled", [2])]
    assert "seq 0" in findings[0].text and "ranks [0, 1] are in seq 2" in findings[0].text


def test_a_rank_without_a_dump_is_reported(tmp_path) -> None:
    write_dumps(tmp_path, {0: [ALL_REDUCE], 2: [ALL_REDUCE]}, 3)
    findings = doctor.diagnose(doctor.load(str(tmp_path)))
    assert [(f.kind, f.ranks) for f in findings] == [("missing", [1])]


def test_the_command_prints_ranks_side_by_side_and_exits_1_on_a_finding(tmp_path, capsys) -> None:
    write_dumps(tmp_path, {0: [ALL_REDUCE, ALL_REDUCE], 1: [ALL_REDUCE]}, 2)
    assert main(["doctor", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "rank 0" in out and "rank 1" in out and "all_reduce float32x4 started" in out
    assert "STALLED: group 'default_pg': rank 1 is behind" in out


def test_the_command_exits_0_when_ranks_agree_and_2_without_dumps(tmp_path, capsys) -> None:
    write_dumps(tmp_path / "agree", {0: [ALL_REDUCE], 1: [ALL_REDUCE]}, 2)
    assert main(["doctor", str(tmp_path / "agree")]) == 0
    assert main(["doctor", str(tmp_path / "empty")]) == 2

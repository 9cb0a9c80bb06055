"""The flight recorder keeps the last N collectives cheaply and writes them out as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from meshcomm.executor import fingerprint as fp
from meshcomm.errors import CommTimeoutError
from meshcomm.trace.flight_recorder import FlightRecorder

ALL_REDUCE = fp.pack("all_reduce", "float32", "sum", 0, 1024)


def test_the_ring_keeps_only_the_last_entries_but_remembers_each_groups_latest() -> None:
    recorder = FlightRecorder(rank=0, world_size=2, capacity=4)
    for seq in range(10):
        recorder.finish(recorder.start("default_pg", seq, ALL_REDUCE, "ring", (0, 1)))
    recorder.start("sub", 0, ALL_REDUCE, "ring", (0,))
    assert [entry[1] for entry in recorder.entries] == [7, 8, 9, 0]
    assert recorder.latest["default_pg"][1] == 9


def test_a_dump_spells_out_each_operation(tmp_path) -> None:
    recorder = FlightRecorder(rank=3, world_size=4, capacity=8)
    recorder.finish(recorder.start("default_pg", 0, ALL_REDUCE, "ring", (0, 1, 2, 3)))
    failed = recorder.start("default_pg", 1, ALL_REDUCE, "ring", (0, 1, 2, 3))
    recorder.finish(failed, CommTimeoutError("timed out"))
    recorder.start("default_pg", 2, fp.pack("broadcast", "int64", "none", 2, 5), "binomial", (0, 1, 2, 3))
    path = recorder.dump("test", str(tmp_path))
    dump = json.loads(Path(path).read_text())
    assert path.endswith("rank3.json") and dump["rank"] == 3 and dump["world_size"] == 4
    first, second, third = dump["operations"]
    assert first["collective"] == "all_reduce" and first["dtype"] == "float32" and first["count"] == 1024
    assert first["state"] == "done" and first["seconds"] >= 0 and first["algorithm"] == "ring"
    assert second["state"] == "failed" and second["error"] == "CommTimeoutError: timed out"
    assert third["call"] == "broadcast(int64, 5 elements, root=2)" and third["state"] == "started"
    assert third["seconds"] is None


def test_a_later_dump_keeps_the_earlier_reason(tmp_path) -> None:
    recorder = FlightRecorder(rank=0, world_size=1)
    recorder.dump("timeout at seq 4", str(tmp_path))
    path = recorder.dump("asked by another rank", str(tmp_path))
    assert json.loads(Path(path).read_text())["reason"] == "timeout at seq 4; then asked by another rank"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.json"]

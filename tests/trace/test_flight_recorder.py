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
    assert [entry[1] for entry in recorder.entries()] == [7, 8, 9, 0]
    assert recorder.latest("default_pg")[1] == 9


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


def p2p_then_a_receive_nobody_answers(directory: str) -> list:
    """Rank 0 sends rank 1 one message; rank 1 then waits (briefly) for a second that never comes."""
    import numpy as np

    import meshcomm as dist
    from meshcomm.api.state import runtime

    rank = dist.get_rank()
    if rank == 0:
        dist.send(np.arange(4, dtype=np.int32), dst=1, tag=3)
    elif rank == 1:
        dist.recv(np.zeros(4, np.int32), src=0, tag=3)
        work = dist.irecv(np.zeros(2, np.int64), src=0, tag=9)
        try:
            work.wait(timeout=0.2)
        except CommTimeoutError:
            pass
        dist.irecv(np.zeros(1, np.int8), src=0, tag=10)  # posted, never waited for, never sent
    dist.barrier()
    runtime().recorder.dump("test", directory)
    with open(Path(directory) / f"rank{rank}.json") as dump:
        return [(op["kind"], op["call"], op["state"]) for op in json.load(dump)["operations"]]


def test_point_to_point_operations_are_recorded_and_an_unfinished_receive_is_reported(tmp_path) -> None:
    from meshcomm.trace import doctor
    from tests.ranks import Cluster

    cluster = Cluster(2)  # its own: the receive left posted must not take a later test's message
    try:
        ops = cluster.run(p2p_then_a_receive_nobody_answers, str(tmp_path))
    finally:
        cluster.close()
    assert ("p2p", "isend to rank 1 (tag 3), 16 B", "done") in ops[0]
    assert ("p2p", "irecv from rank 0 (tag 3), 16 B", "done") in ops[1]
    assert ("p2p", "irecv from rank 0 (tag 9), 16 B", "failed") in ops[1]
    assert ("p2p", "irecv from rank 0 (tag 10), 1 B", "started") in ops[1]
    findings = doctor.diagnose(doctor.load(str(tmp_path)))
    assert [(f.kind, f.ranks) for f in findings] == [("p2p pending", [1])]
    assert "irecv from rank 0 (tag 10)" in findings[0].text

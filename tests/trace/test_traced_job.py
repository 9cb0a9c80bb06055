"""A real 4-rank job under MESHCOMM_TRACE: per-rank files, one merged trace, an arrow per message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from meshcomm.cli.main import main
from meshcomm.trace.messages import TracedTransport
from tests.ranks import Cluster
from tests.ranks import get_cluster

RANKS = 4


def traced_work() -> None:
    import meshcomm as dist

    rank = dist.get_rank()
    small = np.full(8, rank, dtype=np.float32)
    dist.all_reduce(small)  # seq 0 of the default group: ring (MESHCOMM_ALGO)
    big = np.ones(16384, dtype=np.float32)  # ring chunks of 16 KiB, cut into 4 KiB pieces (MESHCOMM_CHUNK_BYTES)
    dist.all_reduce(big)
    assert small[0] == 6 and big[0] == RANKS
    dist.broadcast(small, src=2)
    if rank == 0:
        dist.send(np.arange(3), dst=3)
    elif rank == 3:
        assert dist.recv(np.empty(3, dtype=np.int64)) == 0  # from any source
    trio = dist.new_group([1, 2, 3])
    if rank in (1, 2, 3):
        out = [np.empty(2, dtype=np.int32) for _ in range(3)]
        dist.all_gather(out, np.full(2, rank, dtype=np.int32), group=trio, async_op=True).wait()  # on the group's thread
    dist.barrier()


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trace")
    env = {"MESHCOMM_TRACE": str(directory), "MESHCOMM_ALGO": "all_reduce:ring", "MESHCOMM_CHUNK_BYTES": "4096"}
    cluster = Cluster(RANKS, env=env)
    try:
        cluster.run(traced_work)
    finally:
        cluster.close()  # destroy_process_group closes the files
    return directory


@pytest.fixture(scope="module")
def merged(trace_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    output = tmp_path_factory.mktemp("merged") / "job.json"
    assert main(["trace", "merge", str(trace_dir), "-o", str(output)]) == 0
    return json.loads(output.read_text())["traceEvents"]


def slices(events: list[dict], category: str) -> list[dict]:
    return [e for e in events if e["ph"] == "X" and e["cat"] == category]


def within(inner: dict, outer: dict) -> bool:
    return (inner["pid"], inner["tid"]) == (outer["pid"], outer["tid"]) and (
        outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 0.002
    )


def test_every_rank_writes_its_own_file(trace_dir: Path) -> None:
    assert sorted(p.name for p in trace_dir.iterdir()) == [f"rank{r}.jsonl" for r in range(RANKS)]


def test_merged_trace_has_a_named_track_per_rank(merged: list[dict]) -> None:
    names = {e["pid"]: e["args"]["name"] for e in merged if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {r: f"rank {r}" for r in range(RANKS)}
    assert {e["pid"] for e in merged if e["ph"] == "X"} == set(range(RANKS))


def enclosing(events: list[dict], flow: dict, category: str) -> list[dict]:
    return [e for e in slices(events, category) if (e["pid"], e["tid"]) == (flow["pid"], flow["tid"])
            and e["ts"] < flow["ts"] < e["ts"] + e["dur"]]


def test_every_send_has_exactly_one_arrow_to_a_receive_on_its_destination(merged: list[dict]) -> None:
    starts = {e["id"]: e for e in merged if e["ph"] == "s"}
    ends = {e["id"]: e for e in merged if e["ph"] == "f"}
    sends, recvs = slices(merged, "send"), slices(merged, "recv")
    assert sends and len(starts) == len(ends) == len(sends) == len(recvs)
    seen_sends, seen_recvs = set(), set()
    for arrow, start in starts.items():
        [send] = enclosing(merged, start, "send")  # the only slice open on its track at that moment
        [recv] = enclosing(merged, ends[arrow], "recv")
        assert ends[arrow]["bp"] == "e" and start["ts"] < ends[arrow]["ts"]  # one host: the data left before it arrived
        assert recv["pid"] == send["args"]["dst"] and send["pid"] == recv["args"]["src"]
        assert recv["args"]["bytes"] == send["args"]["bytes"]
        seen_sends.add(id(send))
        seen_recvs.add(id(recv))
    assert len(seen_sends) == len(sends) and len(seen_recvs) == len(recvs)


def test_steps_nest_inside_their_collective_and_messages_lie_within_their_step(merged: list[dict]) -> None:
    collectives, steps = slices(merged, "collective"), slices(merged, "step")
    assert {c["name"] for c in collectives} == {"all_reduce", "broadcast", "all_gather", "barrier"}
    for step in steps:
        owners = [c for c in collectives if c["args"]["seq"] == step["args"]["seq"]
                  and c["args"]["group_id"] == step["args"]["group_id"] and within(step, c)]
        assert len(owners) == 1, step
    for message in slices(merged, "send") + slices(merged, "recv"):
        if message["args"]["kind"] == "collective":
            # on a "messages" track of the thread that ran the step, at a time inside the step
            assert any(within({**message, "tid": s["tid"]}, s) and message["tid"] // 1000 == s["tid"] + 1
                       and s["args"]["step"] == message["args"]["step"] and s["args"]["seq"] == message["args"]["seq"]
                       for s in steps if s["pid"] == message["pid"]), message


def test_slices_of_one_track_nest(merged: list[dict]) -> None:
    tracks: dict[tuple, list[dict]] = {}
    for event in sorted((e for e in merged if e["ph"] == "X"), key=lambda e: (e["ts"], -e["dur"])):
        tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    for events in tracks.values():
        open_ends: list[float] = []
        for event in events:
            while open_ends and open_ends[-1] <= event["ts"]:
                open_ends.pop()
            end = event["ts"] + event["dur"]
            assert not open_ends or end <= open_ends[-1] + 0.002, event
            open_ends.append(end)


def test_ring_all_reduce_shows_its_steps_and_arrows_to_the_next_rank(merged: list[dict]) -> None:
    ring = [c for c in slices(merged, "collective") if c["args"]["seq"] == 0 and c["args"]["group_id"] == 0]
    assert [c["args"]["algorithm"] for c in ring] == ["ring"] * RANKS
    assert all(c["args"]["steps"] == 2 * (RANKS - 1) for c in ring)
    arrows = {(m["args"]["src"], m["args"]["dst"]) for m in slices(merged, "send")
              if m["args"]["kind"] == "collective" and m["args"]["group"] == 0 and m["args"]["seq"] in (0, 1)}
    assert arrows == {(r, (r + 1) % RANKS) for r in range(RANKS)}


def test_pieces_and_any_source_receives_are_matched(merged: list[dict]) -> None:
    pieces = [m for m in slices(merged, "recv") if m["args"]["kind"] == "collective" and m["args"]["seq"] == 1]
    assert len(pieces) == RANKS * 2 * (RANKS - 1) * 4  # 4 pieces of 4 KiB per 16 KiB ring chunk
    p2p = [m for m in slices(merged, "recv") if m["args"]["kind"] == "p2p"]
    assert [(m["pid"], m["args"]["src"], m["args"]["bytes"]) for m in p2p] == [(3, 0, 24)]


def test_async_work_gets_its_own_thread_track(merged: list[dict]) -> None:
    gathers = [c for c in slices(merged, "collective") if c["name"] == "all_gather"]
    assert len(gathers) == 3 and all(c["tid"] != 0 for c in gathers)


def runtime_parts() -> tuple:
    from meshcomm.api import state

    runtime = state.runtime()
    return runtime.trace, type(runtime.transport)


def test_without_meshcomm_trace_nothing_is_installed() -> None:
    for trace, transport in get_cluster(2).run(runtime_parts):
        assert trace is None and transport is not TracedTransport

"""`meshcomm trace merge` without processes: files written by TraceWriter, errors that name the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshcomm.cli.main import main
from meshcomm.trace.merge import merge
from meshcomm.trace.writer import TraceWriter


def message(writer: TraceWriter, kind: str, src: int, dst: int, posted: int) -> None:
    peer = dst if kind == "send" else src
    args = {"peer": peer, "bytes": 8, "kind": "p2p", "group": 0, "tag": 5, "step": 0, "src": src, "dst": dst,
            "failed": False}
    writer.complete(kind, f"{kind} {peer}", posted, posted + 1000, args)


def two_ranks(directory: Path) -> None:
    """Rank 0 sends two messages with one key to rank 1, which posted its receives in order."""
    sender, receiver = TraceWriter(str(directory), 0), TraceWriter(str(directory), 1)
    base = sender.now()
    message(sender, "send", 0, 1, base + 5000)  # written out of posting order
    message(sender, "send", 0, 1, base)
    message(receiver, "recv", 0, 1, base + 100)
    message(receiver, "recv", 0, 1, base + 5100)
    sender.close()
    receiver.close()


def test_messages_with_one_key_match_in_posting_order(tmp_path: Path) -> None:
    two_ranks(tmp_path)
    merged = merge(str(tmp_path))
    assert (merged.ranks, merged.arrows, merged.unmatched, merged.torn_lines) == ([0, 1], 2, 0, 0)
    flows = {}
    for e in merged.trace["traceEvents"]:
        if e["ph"] in ("s", "f"):
            flows.setdefault(e["id"], {})[e["ph"]] = (e["pid"], e["ts"])
    # µs from the first event: out of the send near its start, into the receive near its end
    assert sorted((f["s"], f["f"]) for f in flows.values()) == [((0, 0.5), (1, 0.6)), ((0, 5.5), (1, 5.6))]


def test_a_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    two_ranks(tmp_path)
    with open(tmp_path / "rank1.jsonl", "a", encoding="utf-8") as f:
        f.write('{"ph":"X","cat":"re')  # the rank died while writing
    merged = merge(str(tmp_path))
    assert merged.torn_lines == 1 and merged.arrows == 2


def test_cli_writes_a_chrome_trace_and_says_what_it_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two_ranks(tmp_path / "t")
    out = tmp_path / "job.json"
    assert main(["trace", "merge", str(tmp_path / "t"), "-o", str(out)]) == 0
    trace = json.loads(out.read_text())
    assert trace["displayTimeUnit"] == "ns" and len(trace["traceEvents"]) > 4
    assert "2 ranks" in capsys.readouterr().err


@pytest.mark.parametrize("make, words", [
    (lambda d: d / "missing", "does not exist"),
    (lambda d: d, "no rank<N>.jsonl trace files"),
])
def test_bad_or_empty_directory_is_an_error_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, words: str
) -> None:
    assert main(["trace", "merge", str(make(tmp_path)), "-o", str(tmp_path / "job.json")]) == 1
    err = capsys.readouterr().err
    assert words in err and str(tmp_path) in err
    assert not (tmp_path / "job.json").exists()


def test_a_file_that_is_not_a_trace_is_named(tmp_path: Path) -> None:
    (tmp_path / "rank0.jsonl").write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="rank0.jsonl is not a meshcomm trace file"):
        merge(str(tmp_path))
    (tmp_path / "rank0.jsonl").write_text("garbage\n")
    with pytest.raises(ValueError, match=r"rank0.jsonl:1: not a trace event"):
        merge(str(tmp_path))

"""Forwarding of ranks' output: prefixes, partial lines, pass-through, tails."""

from __future__ import annotations

import io
import os

from meshcomm.launcher.output import Pump, Sink


def pump_bytes(chunks: list[bytes], prefix: bytes) -> tuple[str, list[str]]:
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    pump = Pump(os.fdopen(read_fd, "rb", buffering=0), Sink(out), prefix, name="test-pump")
    pump.start()
    try:
        for chunk in chunks:
            os.write(write_fd, chunk)
    finally:
        os.close(write_fd)
        pump.join(timeout=10)
    assert not pump.is_alive()
    return out.getvalue(), pump.tail()


def test_lines_are_prefixed_even_when_split_across_reads() -> None:
    text, _ = pump_bytes([b"hel", b"lo\nwor", b"ld\n"], b"[rank2]: ")
    assert text == "[rank2]: hello\n[rank2]: world\n"


def test_partial_last_line_is_flushed_with_a_newline_at_eof() -> None:
    text, tail = pump_bytes([b"a\nno newline"], b"[rank0]: ")
    assert text == "[rank0]: a\n[rank0]: no newline\n"
    assert tail == ["a", "no newline"]


def test_without_prefix_bytes_pass_through_unchanged() -> None:
    text, tail = pump_bytes([b"progress 10%\r", b"progress 100%\r\nend"], b"")
    assert text == "progress 10%\rprogress 100%\r\nend"
    assert tail == ["progress 10%\rprogress 100%", "end"]


def test_tail_keeps_the_last_ten_lines() -> None:
    _, tail = pump_bytes([b"".join(b"line %d\n" % i for i in range(25))], b"[rank1]: ")
    assert tail == [f"line {i}" for i in range(15, 25)]

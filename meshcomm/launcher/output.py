"""Copying ranks' stdout/stderr to the launcher's, each line tagged with its rank."""

from __future__ import annotations

import collections
import os
import threading
from typing import IO, TextIO

READ_BYTES = 65536
TAIL_LINES = 10
# A "line" longer than this is forwarded in pieces, so memory stays bounded.
MAX_LINE_BYTES = 1 << 20


class Sink:
    """One destination stream shared by every rank; the lock keeps lines whole."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._broken = False

    def write(self, data: bytes) -> bool:
        """Write whole; False once the reader went away (`| head`, closed stream)."""
        with self._lock:
            if self._broken:
                return False
            try:
                buffer = getattr(self._stream, "buffer", None)
                if buffer is not None:
                    self._stream.flush()
                    buffer.write(data)
                    buffer.flush()
                else:
                    self._stream.write(data.decode(errors="replace"))
                    self._stream.flush()
            except (OSError, ValueError):
                self._broken = True
                return False
            return True


class Pump(threading.Thread):
    """Reads one rank's pipe until EOF and forwards it, remembering the last lines.

    With a prefix, output is forwarded line by line (a partial last line gets a
    newline at EOF, so the next rank's text never lands on it); without one it is
    forwarded chunk by chunk, byte for byte, so prompts and progress bars work.
    """

    def __init__(self, pipe: IO[bytes], sink: Sink, prefix: bytes, name: str) -> None:
        # Daemon: a grandchild that keeps the pipe open must not keep the launcher alive.
        super().__init__(daemon=True, name=name)
        self._pipe = pipe
        self._sink = sink
        self._prefix = prefix
        self._partial = b""
        self._tail: collections.deque[bytes] = collections.deque(maxlen=TAIL_LINES)

    def run(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._pipe.fileno(), READ_BYTES)
                except OSError:
                    break
                if not chunk:
                    break
                if not self._feed(chunk):
                    # Nobody reads our output any more: closing the pipe gives the rank
                    # EPIPE/SIGPIPE, as `python script.py | head` would.
                    return
            if self._partial:
                self._tail.append(self._partial)
                if self._prefix:
                    self._sink.write(self._prefix + self._partial + b"\n")
                self._partial = b""
        finally:
            self._pipe.close()

    def tail(self) -> list[str]:
        """The last lines read (call after join), without prefix or line end."""
        return [line.rstrip(b"\r\n").decode(errors="replace") for line in self._tail]

    def _feed(self, chunk: bytes) -> bool:
        written = True
        if not self._prefix:
            written = self._sink.write(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:
            lines.append(self._partial)
            self._partial = b""
        self._tail.extend(lines)
        if self._prefix and lines:
            written = self._sink.write(b"".join(self._prefix + line + b"\n" for line in lines))
        return written

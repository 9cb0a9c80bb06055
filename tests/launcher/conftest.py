"""Helpers for launcher tests: scripts written into tmp_path, process liveness."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def script(tmp_path: Path) -> Callable[[str, str], str]:
    """Write a Python script into tmp_path and return its path."""

    def write(name: str, source: str) -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return str(path)

    return write


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The state follows the parenthesised command name, which may hold spaces.
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


@pytest.fixture
def running() -> Callable[[int], bool]:
    """Whether a pid is still a live process; a zombie whose parent already died counts as gone."""

    def check(pid: int) -> bool:
        if os.path.isdir("/proc"):
            state = _state(pid)
            return state is not None and state != "Z"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    return check


@pytest.fixture
def exists() -> Callable[[int], bool]:
    """Whether a pid exists at all, zombies included: a rank the launcher failed to reap would."""

    def check(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    return check

"""`meshcomm explain`: formats, output files, colour rules and one-line argument errors that exit 2."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.cli.main import main


def test_text_goes_to_stdout_without_colour_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "all_reduce", "--algo", "ring", "-n", "4", "--count", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("all_reduce / ring on 4 ranks, count 8 (float32)")
    assert "step 6 of 6" in out and "\x1b[" not in out


class _Terminal:
    """Stands in for stdout on a terminal: captures text and says it is a TTY."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_colour_on_a_terminal_unless_no_color_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["explain", "all_reduce", "-n", "3"]) == 0
    assert "\x1b[" in "".join(terminal.parts)

    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["explain", "all_reduce", "-n", "3"]) == 0
    assert "\x1b[" not in "".join(terminal.parts)


def test_format_follows_the_output_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg, page = tmp_path / "ring.svg", tmp_path / "ring.html"
    assert main(["explain", "all_reduce", "-n", "4", "-o", str(svg)]) == 0
    assert main(["explain", "all_reduce", "-n", "4", "--format", "html", "-o", str(page)]) == 0
    ET.parse(svg)
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "wrote" in capsys.readouterr().err


def test_png_to_a_file(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'meshcomm[viz]')")
    target = tmp_path / "ring.png"
    assert main(["explain", "all_reduce", "--algo", "ring", "-n", "4", "--format", "png", "-o", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_without_matplotlib_is_a_usage_error_naming_pip_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from meshcomm.explain import png

    monkeypatch.setattr(png, "available", lambda: False)
    assert main(["explain", "all_reduce", "-o", str(tmp_path / "x.png")]) == 2
    assert "pip install matplotlib" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["frobnicate"],
         "argument COLLECTIVE: unknown collective 'frobnicate'; choose one of: " + ", ".join(ALGORITHMS)),
        (["all_reduce", "--algo", "nope"],
         "argument --algo: unknown all_reduce algorithm 'nope'; choose one of: " + ", ".join(ALGORITHMS["all_reduce"])),
        (["all_reduce", "-n", "0"], "argument -n/--nranks: must be >= 1, got 0"),
        (["all_reduce", "-n", "four"], "argument -n/--nranks: must be an integer, got 'four'"),
        (["broadcast", "-n", "4", "--root", "4"], "argument --root: must be in [0, 4) for -n 4, got 4"),
        (["broadcast", "--root", "-1"], "argument --root: must be >= 0, got -1"),
        (["all_reduce", "--root", "1"], "argument --root: applies only to broadcast, reduce, gather, scatter"),
        (["all_reduce", "--count", "0"], "argument --count: must be >= 1, got 0"),
        (["all_reduce", "--count", "1e3"], "argument --count: must be an integer, got '1e3'"),
        (["barrier", "--count", "2"], "argument --count: does not apply to barrier"),
        (["all_reduce", "--dtype", "complex7"], "argument --dtype: must be one of"),
        (["all_reduce", "--format", "gif"], "argument --format: invalid choice: 'gif'"),
    ],
)
def test_bad_arguments_exit_2_with_one_error_line_naming_the_argument(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", *argv]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], captured.err
    assert captured.out == ""


def test_help_describes_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--format" in out and "html" in out and "--algo" in out


def test_ranks_per_host_draws_the_node_aware_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    # Two hosts of two ranks: the hierarchical all_reduce crosses hosts only between equal local ranks.
    assert main(["explain", "all_reduce", "--algo", "hierarchical", "-n", "4", "--ranks-per-host", "2"]) == 0
    two_hosts = capsys.readouterr().out
    assert "rank 0 -> rank 2" in two_hosts and "rank 1 -> rank 3" in two_hosts
    assert "rank 0 -> rank 3" not in two_hosts and "rank 1 -> rank 2" not in two_hosts
    assert main(["explain", "all_reduce", "--algo", "hierarchical", "-n", "4"]) == 0
    assert capsys.readouterr().out != two_hosts

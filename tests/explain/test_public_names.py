"""meshcomm.explain's public names, and that drawing text never imports matplotlib."""

from __future__ import annotations

import subprocess
import sys

import pytest

import meshcomm.explain as explain


def test_public_names_are_exactly_these() -> None:
    assert explain.__all__ == ["FORMATS", "Trace", "build_trace", "make_problem", "render"]
    assert list(explain.FORMATS) == ["text", "svg", "html", "png"]


def test_text_svg_and_html_do_not_import_matplotlib() -> None:
    code = (
        "import sys\n"
        "from meshcomm.explain import build_trace, make_problem, render\n"
        "trace = build_trace(make_problem('all_reduce', 3), 'ring')\n"
        "for fmt in ('text', 'svg', 'html'):\n"
        "    render(trace, fmt)\n"
        "print('matplotlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False"


def test_unknown_format_is_a_value_error_listing_the_formats() -> None:
    trace = explain.build_trace(explain.make_problem("all_reduce", 2), "ring")
    with pytest.raises(ValueError, match="format must be one of text, svg, html, png, got 'gif'"):
        explain.render(trace, "gif")

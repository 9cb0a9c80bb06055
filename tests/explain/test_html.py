"""The HTML page: self-contained (no external resources), one inline SVG per step, a slider over them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from meshcomm.explain import build_trace, make_problem, render


def _page(collective: str = "all_reduce", algorithm: str = "ring", n: int = 4) -> str:
    return str(render(build_trace(make_problem(collective, n), algorithm), "html"))


def test_page_loads_nothing_from_outside() -> None:
    page = _page()
    assert not re.search(r"https?:|//[a-z]|\bsrc=|\bhref=|url\(|@import", page, re.IGNORECASE)


def test_page_has_one_inline_svg_and_section_per_step_and_a_slider_over_them() -> None:
    page = _page()
    steps = 2 * (4 - 1)
    assert page.count("<svg") == page.count("</svg>") == steps + 1
    assert page.count('<section class="step"') == steps + 1
    assert f'id="slider" type="range" min="0" max="{steps}"' in page
    assert "<script>" in page and "setInterval" in page


def test_every_inline_svg_is_well_formed() -> None:
    page = _page("gather", "binomial", 5)
    for svg in re.findall(r"<svg.*?</svg>", page, re.DOTALL):
        ET.fromstring(svg)


def test_each_step_lists_its_operations_as_text() -> None:
    page = _page()
    assert "rank 0 -&gt; rank 1" in page  # escaped inside <pre>
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")

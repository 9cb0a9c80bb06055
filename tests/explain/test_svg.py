"""SVG output: well-formed XML whose boxes and arrows are the trace's chunks and messages."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from meshcomm.explain import build_trace, make_problem, render
from meshcomm.explain.layout import Panel, Text
from meshcomm.explain.svg import panel_svg

SVG = "{http://www.w3.org/2000/svg}"


def _ring(n: int = 4, count: int = 8) -> ET.Element:
    return ET.fromstring(str(render(build_trace(make_problem("all_reduce", n, count), "ring"), "svg")).encode())


def test_svg_is_well_formed_with_a_size_and_a_title() -> None:
    root = _ring()
    assert root.tag == f"{SVG}svg"
    assert float(root.get("width", "0")) > 0 and float(root.get("height", "0")) > 0
    assert root.find(f"{SVG}title").text == "all_reduce / ring on 4 ranks, count 8 (float32)"


def test_one_panel_per_step_plus_the_start() -> None:
    panels = _ring().findall(f"{SVG}g")
    assert len(panels) == 2 * (4 - 1) + 1
    titles = [p.find(f"{SVG}text").text for p in panels]
    assert titles == ["before step 1"] + [f"step {k} of 6" for k in range(1, 7)]


def test_each_step_draws_one_arrow_per_message_and_per_local_operation() -> None:
    trace = build_trace(make_problem("all_reduce", 4, 8), "ring")
    panels = _ring().findall(f"{SVG}g")
    for step, panel in zip(trace.steps, panels[1:]):
        assert len(panel.findall(f"{SVG}path")) == len(step.messages) + len(step.local)


def test_last_panel_labels_every_chunk_with_the_full_sum() -> None:
    last = _ring().findall(f"{SVG}g")[-1]
    labels = [t.text for t in last.findall(f"{SVG}text")]
    # 4 ranks x 4 output chunks, plus the arrows' labels, which carry full sums in the all-gather phase.
    assert labels.count("0+1+2+3") >= 16


def test_labels_with_markup_characters_are_escaped() -> None:
    # No rank label contains "<" or "&"; a hand-made panel checks the escaping all text goes through.
    panel = Panel("a < b & c", 100, 50, [Text(10, 10, "x<y&z")])
    root = ET.fromstring(panel_svg(panel, "t & <u>").encode())
    assert root.find(f"{SVG}text").text == "x<y&z"
